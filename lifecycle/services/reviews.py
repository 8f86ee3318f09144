"""Review tasks: open one (lifecycle.services.decisions decides it; assignment says who may)."""
from __future__ import annotations

from typing import Any

from django.db.models import Max
from django.utils import timezone

from lifecycle.models import Requirement, ReviewTask
from lifecycle.services.outbox import emit
from lifecycle.services.sla_policies import policy_for
from lifecycle.states import REVIEW_OPTIONS, Decision

# The text a decision must carry, by decision.
REQUIRED_TEXT = {Decision.REJECT: "reason", Decision.REQUEST_CHANGES: "feedback", Decision.ANSWER: "answer",
                 Decision.INJECT_CONSTRAINT: "constraint"}
# The texts each decision takes (a reason, a note for the audit, with any); the API refuses any other.
DECISION_TEXTS = {Decision.APPROVE: ("reason",), Decision.REJECT: ("reason",),
                  Decision.REQUEST_CHANGES: ("feedback", "reason"), Decision.ANSWER: ("answer", "reason"),
                  Decision.OVERRIDE_BUDGET: ("budget", "reason"), Decision.INJECT_CONSTRAINT: ("constraint", "reason")}
TEXT_MAX_CHARS = {"reason": 4000, "feedback": 8000, "answer": 8000, "constraint": 2000}  # a decision's, whoever sends it


def review_open(
    requirement: Requirement, *, kind: str, question: str, round: int | None = None, reasoning: str = "",
    context: dict[str, Any] | None = None, resume_target: str = "",
) -> ReviewTask:
    """Open a review task inside the caller's transaction (which holds the requirement's lock) and
    announce it after commit. Without a `round`, the task takes the next free round of its kind: kinds
    raised from several places (escalations, failed steps) must never collide on (requirement, kind, round)."""
    if round is None:
        latest_round = requirement.review_tasks.filter(kind=kind).aggregate(top=Max("round"))["top"] or 0
        round = latest_round + 1
    policy = policy_for(kind, requirement.project.settings)  # per project, e.g. stories 24 h, deployment 4 h
    task = ReviewTask.objects.create(
        organization_id=requirement.organization_id, requirement=requirement, kind=kind, round=round,
        question=question, reasoning=reasoning, context=context or {}, options=[str(o) for o in REVIEW_OPTIONS[kind]],
        resume_target=resume_target, **policy.fields_for_new_task(timezone.now()),
    )
    emit(requirement, "ReviewTaskOpened", {"review_task": str(task.pk), "kind": kind})
    return task
