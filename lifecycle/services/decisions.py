"""Decide a review task: the one way the admin, the API and policies resolve one; the flow resumes where the
task says (lifecycle.services.outcomes)."""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from lifecycle.actors import Actor
from lifecycle.budget_limits import problems
from lifecycle.errors import DomainError, IllegalTransition, echoed
from lifecycle.models import ReviewTask
from lifecycle.services import outcomes
from lifecycle.services.assignment import ensure_may_review, lock_task_requirement, replay_hold
from lifecycle.services.meta_eval import review_decision_logged
from lifecycle.services.outbox import emit
from lifecycle.services.reviews import REQUIRED_TEXT, TEXT_MAX_CHARS
from lifecycle.services.story_edits import ensure_stories_unchanged
from lifecycle.services.transitions import transition
from lifecycle.states import Decision


def review_decide(
    *, task_id, actor: Actor, decision: str, reason: str = "", feedback: str = "", answer: str = "",
    constraint: str = "", budget: dict[str, Any] | None = None, origin: dict[str, Any] | None = None,
    stories_version: str | None = None, version_required: bool = False,
) -> ReviewTask:
    """Decide a review task once; the flow resumes where the task says. Concurrent deciders get 409.
    `stories_version`: the version of the stories the decider was shown (story_edits.stories_version); stories
    edited since are a 409 (StoriesChanged) and nothing is decided. `version_required`: the decider reads where the
    version is shown (the review page, the API), so approving stories needs it; not a policy, a replay or a bulk
    approval, which show no stories (a Slack button sends the version it was posted with, when it has one)."""
    with transaction.atomic():
        lock_task_requirement(task_id)  # the requirement first, then the task: the order of every writer
        task = ReviewTask.objects.select_for_update(of=("self",)).select_related("organization", "requirement").get(
            pk=task_id)
        requirement = task.requirement
        if actor.is_human:
            ensure_may_review(actor.user, task)
        if not task.is_pending:  # before the decision's own checks: a decided task is a conflict, whatever is sent
            raise IllegalTransition(f"review task is already {task.state} ({task.decision or 'no decision'})")
        if actor.is_human and (held := replay_hold(task)):
            raise IllegalTransition(held)
        ensure_stories_unchanged(task, decision, stories_version, required=version_required)
        texts = decision_checked(task, decision, reason=reason, feedback=feedback, answer=answer,
                                 constraint=constraint, budget=budget)
        task.decision, task.reason = decision, texts["reason"]
        task.feedback = own_text(decision, texts)
        task.decision_data = {"budget": budget} if budget is not None else {}
        task.decided_by = actor.user
        task.decided_by_policy = "" if actor.is_human else actor.role
        task.decided_via = actor.via if actor.via in ReviewTask.Via.values else ReviewTask.Via.POLICY
        task.decided_at = timezone.now()
        audit = {"decision": decision, **texts, **task.decision_data, **({"origin": origin} if origin else {}),
                 **({"stories_version": stories_version} if stories_version is not None else {})}
        transition(task, "resolve", actor=actor, metadata=audit)
        outcomes.apply(task, requirement, actor)
        review_decision_logged(task, actor)
        emit(requirement, "ReviewTaskResolved", {"review_task": str(task.pk), "decision": decision})
    return task


def own_text(decision: str, texts: dict[str, str]) -> str:
    """The text a decision acts on, kept in `feedback`: an answer's answer, an injection's constraint, else the
    feedback; never another field's text sent alongside."""
    return texts[{Decision.ANSWER: "answer", Decision.INJECT_CONSTRAINT: "constraint"}.get(decision, "feedback")]


def decision_checked(task: ReviewTask, decision: str, *, reason: str = "", feedback: str = "", answer: str = "",
                     constraint: str = "", budget: dict[str, Any] | None = None) -> dict[str, str]:
    """The decision's texts, stripped, once the task can take it as sent (DomainError naming the field otherwise):
    one of its options, with the text it needs, a constraint or new limits only where they belong, limits of the
    right shape and bounds. Also checked when the assistant asks for a decision, so none is offered that could
    only fail."""
    texts = {"reason": reason.strip(), "feedback": feedback.strip(), "answer": answer.strip(),
             "constraint": constraint.strip()}
    _validate(task, decision, texts)
    _validate_budget(decision, budget)
    return texts


def _validate(task: ReviewTask, decision: str, texts: dict[str, str]) -> None:
    if decision not in task.options:
        raise DomainError(f"'{echoed(decision)}' is not an option for this task; options: {', '.join(task.options)}",
                          "decision")
    for name, text in texts.items():  # the API's bounds, for the admin's forms and the assistant's requests too
        if len(text) > TEXT_MAX_CHARS[name]:
            raise DomainError(f"the {name} is {len(text)} characters long; at most {TEXT_MAX_CHARS[name]}", name)
    needed = REQUIRED_TEXT.get(decision)
    if needed and not texts[needed]:
        what = {"feedback": "feedback (what to change)"}.get(needed, f"a {needed}")
        raise DomainError(f"a '{decision}' decision needs {what}", needed)
    if texts["constraint"] and decision != Decision.INJECT_CONSTRAINT:
        raise DomainError("only an 'inject_constraint' decision takes a constraint", "constraint")


def _validate_budget(decision: str, budget: dict[str, Any] | None) -> None:
    """New limits come with an override and only with one; their shape is checked here, their room by the gate."""
    if decision != Decision.OVERRIDE_BUDGET:
        if budget is not None:
            raise DomainError("only an 'override_budget' decision takes new limits", "budget")
        return
    found = ["an 'override_budget' decision needs the new limits"] if not budget else problems(budget)
    if found:
        raise DomainError("; ".join(found), "budget")
