"""Autonomous mode: the operator's policies decide gates on the reviewer's behalf, each decision logged and
recorded as the policy's, through the same review_decide a person uses."""
from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from lifecycle import budget_limits as bl
from lifecycle.actors import Actor
from lifecycle.errors import DomainError
from lifecycle.models import Requirement, ReviewTask
from lifecycle.services.budget_gate import budget_grace
from lifecycle.services.decisions import review_decide
from lifecycle.states import Decision, ReviewKind

log = logging.getLogger("aiteam.progress")
AUTONOMOUS = Actor.policy("autonomous")
POLICY_OPTIONS = {"terminate": Decision.REJECT, "approve_partial": Decision.APPROVE,
                  "override_budget": Decision.OVERRIDE_BUDGET}
# Gates the operator pre-authorizes in autonomous mode (AITEAM_AUTONOMOUS).
AUTONOMOUS_KINDS = {ReviewKind.STORIES_APPROVAL, ReviewKind.DEPLOYMENT_APPROVAL}


def autonomous_decide(task: ReviewTask) -> None:
    """In autonomous mode, decide a newly opened task the policies cover; leave every other task to people."""
    if not settings.AITEAM_AUTONOMOUS:
        return
    if task.kind == ReviewKind.BUDGET_EXHAUSTED:
        budget_policy_decide(task)
    elif task.kind in AUTONOMOUS_KINDS and task.is_pending:
        log.info("autonomous mode: approving %s on the reviewer's behalf", task)
        review_decide(task_id=task.pk, actor=AUTONOMOUS, decision=Decision.APPROVE,
                      reason="autonomous mode (AITEAM_AUTONOMOUS=true)")


def budget_policy_decide(task: ReviewTask) -> ReviewTask | None:
    """Autonomous mode: decide as AITEAM_BUDGET_POLICY says, logged and recorded as the policy's decision.
    approve_partial falls back to terminate where there is no partial output; override_budget grants the
    grace (spent + half the limit) at most AITEAM_BUDGET_POLICY_MAX_OVERRIDES times per requirement."""
    task = ReviewTask.objects.get(pk=task.pk)
    if not task.is_pending:
        return None
    decision = POLICY_OPTIONS[settings.AITEAM_BUDGET_POLICY]
    if decision not in task.options or (decision == Decision.OVERRIDE_BUDGET and _policy_overrides_used(task)):
        decision = Decision.REJECT
    reason = f"autonomous mode (AITEAM_BUDGET_POLICY={settings.AITEAM_BUDGET_POLICY}): {decision}"
    log.info("autonomous mode: budget task %s decided by policy: %s", task, decision)
    budget = _policy_override(task) if decision == Decision.OVERRIDE_BUDGET else None
    try:
        return review_decide(task_id=task.pk, actor=AUTONOMOUS, decision=decision, reason=reason, budget=budget)
    except DomainError as exc:  # the grace leaves another parked role still over: terminate rather than loop
        log.warning("autonomous mode: %s cannot be decided as %s (%s); terminating", task, decision, exc)
        return review_decide(task_id=task.pk, actor=AUTONOMOUS, decision=Decision.REJECT,
                              reason=f"{reason}, refused ({exc}): terminate")


def _policy_overrides_used(task: ReviewTask) -> bool:
    used = ReviewTask.objects.filter(requirement_id=task.requirement_id, kind=ReviewKind.BUDGET_EXHAUSTED,
                                     decided_by_policy=AUTONOMOUS.role, decision=Decision.OVERRIDE_BUDGET).count()
    return used >= settings.AITEAM_BUDGET_POLICY_MAX_OVERRIDES


def _policy_override(task: ReviewTask) -> dict[str, Any]:
    return bl.as_json(budget_grace(Requirement.objects.select_related("project").get(pk=task.requirement_id), task))
