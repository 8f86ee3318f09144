"""Review tasks: open one, decide one. The admin, the API and policies all call review_decide."""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import Organization, Requirement, ReviewTask
from lifecycle.services import outcomes
from lifecycle.services.assignment import decide_refusal, lock_task_requirement
from lifecycle.services.outbox import emit
from lifecycle.services.sla_policies import policy_for
from lifecycle.services.transitions import transition
from lifecycle.states import Decision, ReviewKind

OPTIONS = {
    ReviewKind.CLARIFICATION: [Decision.ANSWER, Decision.REJECT],
    ReviewKind.STORIES_APPROVAL: [Decision.APPROVE, Decision.REJECT, Decision.REQUEST_CHANGES],
    ReviewKind.ESCALATION: [Decision.REQUEST_CHANGES, Decision.REJECT],
    ReviewKind.STEP_FAILED: [Decision.APPROVE, Decision.REJECT],
    ReviewKind.DESIGN_REVIEW: [Decision.APPROVE, Decision.REQUEST_CHANGES, Decision.REJECT],
    ReviewKind.CODE_REVIEW: [Decision.APPROVE, Decision.REQUEST_CHANGES, Decision.REJECT],
    ReviewKind.DEPLOYMENT_APPROVAL: [Decision.APPROVE, Decision.REJECT],
    # approve = approve the partial output (offered only where there is one), reject = terminate
    ReviewKind.BUDGET_EXHAUSTED: [Decision.OVERRIDE_BUDGET, Decision.INJECT_CONSTRAINT, Decision.APPROVE, Decision.REJECT],
}
# The text a decision must carry, by decision.
REQUIRED_TEXT = {Decision.REJECT: "reason", Decision.REQUEST_CHANGES: "feedback", Decision.ANSWER: "answer",
                 Decision.INJECT_CONSTRAINT: "constraint"}


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
        question=question, reasoning=reasoning, context=context or {}, options=[str(o) for o in OPTIONS[kind]],
        resume_target=resume_target, **policy.fields_for_new_task(timezone.now()),
    )
    emit(requirement, "ReviewTaskOpened", {"review_task": str(task.pk), "kind": kind})
    return task


def ensure_can_decide(user: Any, organization: Organization, project_id: Any = None) -> None:
    refusal = decide_refusal(user, organization, project_id=project_id)
    if refusal:
        raise NotPermitted(refusal)


def review_decide(
    *, task_id, actor: Actor, decision: str, reason: str = "", feedback: str = "", answer: str = "",
    constraint: str = "", budget: dict[str, Any] | None = None, origin: dict[str, Any] | None = None,
) -> ReviewTask:
    """Decide a review task once; the flow resumes where the task says. Concurrent deciders get 409."""
    with transaction.atomic():
        lock_task_requirement(task_id)  # the requirement first, then the task: the order of every writer
        task = ReviewTask.objects.select_for_update(of=("self",)).select_related("organization", "requirement").get(
            pk=task_id)
        requirement = task.requirement
        if actor.is_human:
            ensure_can_decide(actor.user, task.organization, task.requirement.project_id)
        if not task.is_pending:  # before the decision's own checks: a decided task is a conflict, whatever is sent
            raise IllegalTransition(f"review task is already {task.state} ({task.decision or 'no decision'})")
        texts = {"reason": reason.strip(), "feedback": feedback.strip(), "answer": answer.strip(),
                 "constraint": constraint.strip()}
        _validate(task, decision, texts)
        _validate_budget(decision, budget)
        task.decision, task.reason = decision, texts["reason"]
        task.feedback = texts["feedback"] or texts["answer"] or texts["constraint"]
        task.decision_data = {"budget": budget} if budget is not None else {}
        task.decided_by = actor.user
        task.decided_by_policy = "" if actor.is_human else actor.role
        task.decided_via = actor.via if actor.via in ReviewTask.Via.values else ReviewTask.Via.POLICY
        task.decided_at = timezone.now()
        audit = {"decision": decision, **texts, **task.decision_data, **({"origin": origin} if origin else {})}
        transition(task, "resolve", actor=actor, metadata=audit)
        outcomes.apply(task, requirement, actor)
        emit(requirement, "ReviewTaskResolved", {"review_task": str(task.pk), "decision": decision})
    return task


def _validate(task: ReviewTask, decision: str, texts: dict[str, str]) -> None:
    if decision not in task.options:
        raise DomainError(f"'{decision}' is not an option for this task; options: {', '.join(task.options)}", "decision")
    needed = REQUIRED_TEXT.get(decision)
    if needed and not texts[needed]:
        raise DomainError(f"a '{decision}' decision needs a {needed}", needed)
    if texts["constraint"] and decision != Decision.INJECT_CONSTRAINT:
        raise DomainError("only an 'inject_constraint' decision takes a constraint", "constraint")


def _validate_budget(decision: str, budget: dict[str, Any] | None) -> None:
    """New limits come with an override and only with one; their shape is checked here, their room by the gate."""
    from lifecycle.budget_limits import problems

    if decision != Decision.OVERRIDE_BUDGET:
        if budget is not None:
            raise DomainError("only an 'override_budget' decision takes new limits", "budget")
        return
    found = ["an 'override_budget' decision needs the new limits"] if not budget else problems(budget)
    if found:
        raise DomainError("; ".join(found), "budget")
