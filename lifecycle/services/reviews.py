"""Review tasks: open one, decide one. The admin, the API and policies all call review_decide."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import Membership, Organization, Requirement, ReviewTask
from lifecycle.services import outcomes
from lifecycle.services.outbox import emit
from lifecycle.services.transitions import transition
from lifecycle.states import DECIDING_ROLES, Decision, ReviewKind

OPTIONS = {
    ReviewKind.CLARIFICATION: [Decision.ANSWER, Decision.REJECT],
    ReviewKind.STORIES_APPROVAL: [Decision.APPROVE, Decision.REJECT, Decision.REQUEST_CHANGES],
    ReviewKind.ESCALATION: [Decision.REQUEST_CHANGES, Decision.REJECT],
    ReviewKind.STEP_FAILED: [Decision.APPROVE, Decision.REJECT],
}
# The text a decision must carry, by decision.
REQUIRED_TEXT = {Decision.REJECT: "reason", Decision.REQUEST_CHANGES: "feedback", Decision.ANSWER: "answer"}


def review_open(
    requirement: Requirement, *, kind: str, round: int, question: str, reasoning: str = "",
    context: dict[str, Any] | None = None, resume_target: str = "",
) -> ReviewTask:
    """Open a review task inside the caller's transaction and announce it after commit."""
    hours = settings.AITEAM_REVIEW_SLA_HOURS.get(kind, 24)
    task = ReviewTask.objects.create(
        organization_id=requirement.organization_id, requirement=requirement, kind=kind, round=round,
        question=question, reasoning=reasoning, context=context or {}, options=[str(o) for o in OPTIONS[kind]],
        resume_target=resume_target, sla_deadline=timezone.now() + timedelta(hours=hours),
    )
    emit(requirement, "ReviewTaskOpened", {"review_task": str(task.pk), "kind": kind})
    return task


def ensure_can_decide(user: Any, organization: Organization) -> None:
    allowed = Membership.objects.filter(user=user, organization=organization, role__in=DECIDING_ROLES).exists()
    if not allowed:
        raise NotPermitted(f"{user} has no reviewer role in {organization} and may not decide its review tasks")


def review_decide(
    *, task_id, actor: Actor, decision: str, reason: str = "", feedback: str = "", answer: str = ""
) -> ReviewTask:
    """Decide a review task once; the flow resumes where the task says. Concurrent deciders get 409."""
    with transaction.atomic():
        task = ReviewTask.objects.select_for_update().select_related("organization").get(pk=task_id)
        if actor.is_human:
            ensure_can_decide(actor.user, task.organization)
        texts = {"reason": reason.strip(), "feedback": feedback.strip(), "answer": answer.strip()}
        _validate(task, decision, texts)
        if not task.is_pending:
            raise IllegalTransition(f"review task is already {task.state} ({task.decision or 'no decision'})")
        requirement = Requirement.objects.select_for_update().get(pk=task.requirement_id)
        task.decision, task.reason, task.feedback = decision, texts["reason"], texts["feedback"] or texts["answer"]
        task.decided_by = actor.user
        task.decided_by_policy = "" if actor.is_human else actor.role
        task.decided_via = actor.via if actor.via in ReviewTask.Via.values else ReviewTask.Via.POLICY
        task.decided_at = timezone.now()
        transition(task, "resolve", actor=actor, metadata={"decision": decision, **texts})
        outcomes.apply(task, requirement, actor)
        emit(requirement, "ReviewTaskResolved", {"review_task": str(task.pk), "decision": decision})
    return task


def _validate(task: ReviewTask, decision: str, texts: dict[str, str]) -> None:
    if decision not in task.options:
        raise DomainError(f"'{decision}' is not an option for this task; options: {', '.join(task.options)}", "decision")
    needed = REQUIRED_TEXT.get(decision)
    if needed and not texts[needed]:
        raise DomainError(f"a '{decision}' decision needs a {needed}", needed)
