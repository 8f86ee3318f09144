"""What each decided review task does to its requirement. Called inside review_decide's transaction."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import timezone

from lifecycle import step_keys
from lifecycle.actors import Actor
from lifecycle.models import Requirement, ReviewTask, Step
from lifecycle.services import leases, scheduling
from lifecycle.services.budget_gate import budget_decision_apply
from lifecycle.services.design import spec_approve
from lifecycle.services.development import code_review_fail, code_review_pass, resume_with_guidance
from lifecycle.services.gate_routing import acceptance_criteria_restated
from lifecycle.services.outbox import emit
from lifecycle.services.quality import deployment_rejected
from lifecycle.services.reviews import review_open
from lifecycle.services.transitions import transition
from lifecycle.states import PENDING_REVIEW_STATES, Decision, ReviewKind, StoryState

# Kinds whose "reject" means something other than "cancel the requirement".
REJECT_HANDLED = {ReviewKind.STORIES_APPROVAL, ReviewKind.DEPLOYMENT_APPROVAL}


def apply(task: ReviewTask, requirement: Requirement, actor: Actor) -> None:
    if task.decision == Decision.REJECT and task.kind not in REJECT_HANDLED:
        requirement_cancel(requirement, actor=actor, reason=task.reason)
        return
    OUTCOMES[task.kind](task, requirement, actor)


def requirement_cancel(requirement: Requirement, *, actor: Actor, reason: str,
                       origin: dict[str, Any] | None = None) -> None:
    """A human terminated the requirement: cancel it and expire whatever still waits on it."""
    requirement.budget_exhausted, requirement.budget_paused_from = False, ""  # no longer paused for a budget
    transition(requirement, "cancel", actor=actor, metadata={"reason": reason, **({"origin": origin} if origin else {})})
    expired = []
    for pending in ReviewTask.objects.select_for_update().filter(requirement=requirement, state__in=PENDING_REVIEW_STATES):
        transition(pending, "expire", actor=actor, metadata={"reason": "requirement cancelled"})
        expired.append(str(pending.pk))
    emit(requirement, "RequirementCancelled", {"reason": reason, "expired_tasks": expired})


def _stories(task: ReviewTask, requirement: Requirement, actor: Actor) -> None:
    current = requirement.stories.select_for_update().filter(round=task.round, state=StoryState.DRAFT)
    event = "approve" if task.decision == Decision.APPROVE else "reject"
    for story in current:
        story.decided_by, story.decided_by_policy = actor.user, ("" if actor.is_human else actor.role)
        story.decided_at = timezone.now()
        story.rejection_reason = task.sent_back_text if event == "reject" else ""
        transition(story, event, actor=actor, metadata={"review_task": str(task.pk)})
    if event == "approve":
        emit(requirement, "StoriesApproved", {"round": task.round})
        return
    transition(requirement, "reject_stories", actor=actor, metadata={"reason": task.reason, "feedback": task.feedback})
    _rework_or_escalate(requirement, task)


def _rework_or_escalate(requirement: Requirement, task: ReviewTask) -> None:
    if requirement.story_round < settings.AITEAM_MAX_STORY_ROUNDS:
        emit(requirement, "StoriesReworkRequested", {"round": requirement.story_round + 1})
        return
    review_open(
        requirement, kind=ReviewKind.ESCALATION,
        question=f"The stories were sent back {requirement.story_round} times. Give guidance for one more "
        "round (request changes with feedback), or reject to cancel the requirement.",
        context={"last_decision": task.decision, "last_text": task.sent_back_text},
        resume_target=step_keys.BA_STORIES,
    )


def _escalation(task: ReviewTask, requirement: Requirement, actor: Actor) -> None:
    if task.resume_target == step_keys.FIX:
        resume_with_guidance(requirement, actor=actor, guidance=task.feedback)
        return
    if task.resume_target == step_keys.QC_TESTS:  # criteria restated for the BA (lifecycle/services/gate_routing.py)
        acceptance_criteria_restated(requirement, actor=actor, guidance=task.feedback)
        return
    emit(requirement, "StoriesReworkRequested", {"round": requirement.story_round + 1})


def _design_review(task: ReviewTask, requirement: Requirement, actor: Actor) -> None:
    if task.decision == Decision.APPROVE:
        spec_approve(requirement, actor=actor)
        return
    scheduling.step_schedule(requirement_id=requirement.pk, key=step_keys.ARCHITECT, attempt=requirement.design_round + 1)


def _code_review(task: ReviewTask, requirement: Requirement, actor: Actor) -> None:
    if task.decision == Decision.APPROVE:
        code_review_pass(requirement, actor=actor)
    else:
        code_review_fail(requirement, actor=actor, notes=[task.feedback])


def _clarification(task: ReviewTask, requirement: Requirement, actor: Actor) -> None:
    questions = task.context.get("questions", [])
    requirement.clarifications = [*requirement.clarifications, {"questions": questions, "answer": task.feedback}]
    requirement.clarification_round += 1
    transition(requirement, "answer", actor=actor, metadata={"answer": task.feedback})
    emit(requirement, "RequirementReceived", {"round": requirement.clarification_round})
    scheduling.step_schedule(requirement_id=requirement.pk, key=step_keys.PO_CLARIFY, attempt=requirement.clarification_round)


def _step_failed(task: ReviewTask, requirement: Requirement, actor: Actor) -> None:
    leases.step_retry_by_human(Step.objects.select_for_update().get(pk=task.context["step_id"]))


def _deployment(task: ReviewTask, requirement: Requirement, actor: Actor) -> None:
    if task.decision == Decision.APPROVE:
        scheduling.step_schedule(requirement_id=requirement.pk, key=step_keys.DELIVER, attempt=task.round)
    else:
        deployment_rejected(requirement, actor=actor, reason=task.reason)


def _budget(task: ReviewTask, requirement: Requirement, actor: Actor) -> None:
    budget_decision_apply(task, requirement, actor=actor)


OUTCOMES = {
    ReviewKind.STORIES_APPROVAL: _stories,
    ReviewKind.ESCALATION: _escalation,
    ReviewKind.CLARIFICATION: _clarification,
    ReviewKind.STEP_FAILED: _step_failed,
    ReviewKind.DESIGN_REVIEW: _design_review,
    ReviewKind.CODE_REVIEW: _code_review,
    ReviewKind.DEPLOYMENT_APPROVAL: _deployment,
    ReviewKind.BUDGET_EXHAUSTED: _budget,  # reject (terminate) cancels, like every kind not in REJECT_HANDLED
}
