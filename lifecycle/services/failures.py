"""A step that cannot finish becomes a question for a human, never a silent loss."""
from __future__ import annotations

from lifecycle.models import ReviewTask, Step
from lifecycle.states import ReviewKind


def open_step_failed_task(step: Step) -> ReviewTask:
    from lifecycle.services.reviews import review_open

    previous = ReviewTask.objects.filter(requirement_id=step.requirement_id, kind=ReviewKind.STEP_FAILED).count()
    return review_open(
        step.requirement, kind=ReviewKind.STEP_FAILED, round=previous + 1,
        question=f"Step '{step.key}' (attempt {step.attempt}) failed after {step.runs} run(s). "
        "Approve to run it again, or reject to cancel the requirement.",
        reasoning=step.error, context={"step_id": step.pk, "step": step.key, "error": step.error},
        resume_target=step.key,
    )
