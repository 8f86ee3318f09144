"""A step that cannot finish becomes a question for a human, never a silent loss."""
from __future__ import annotations

from lifecycle.models import Requirement, ReviewTask, Step
from lifecycle.states import ReviewKind


def open_step_failed_task(step: Step) -> ReviewTask:
    from lifecycle.services.reviews import review_open

    requirement = Requirement.objects.select_for_update().get(pk=step.requirement_id)  # serializes the round count
    return review_open(
        requirement, kind=ReviewKind.STEP_FAILED,
        question=f"Step '{step.key}' (attempt {step.attempt}) failed after {step.runs} run(s). "
        "Approve to run it again, or reject to cancel the requirement.",
        reasoning=step.error, context={"step_id": step.pk, "step": step.key, "error": step.error},
        resume_target=step.key,
    )
