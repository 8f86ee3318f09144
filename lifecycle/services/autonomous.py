"""Gates decided when they open, on the reviewer's behalf, each decision logged and recorded as the policy's,
through the same review_decide a person uses (ADR 36, "Pre-authorizations decide two gates").

A project's pre-authorization of `stories_approval:approve` approves its stories; of `deployment_approval:approve`
its deployments, never one with a hold: a change that adds or edits a CI workflow or uses `secrets.` in one (a
workflow runs with the repository's secrets and tokens, so a person reads it first: ADR 27), or, on an existing
repository, one the scope guard flagged (too large, or touching CI, dependency or settings files: ADR 35). The
operator's AITEAM_AUTONOMOUS is every project's default pre-authorization of the stories (never of a deployment)
and lets AITEAM_BUDGET_POLICY decide a budget that ran out. Other pre-authorized types are not decided here."""
from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from lifecycle import budget_limits as bl
from lifecycle.actors import Actor
from lifecycle.errors import DomainError
from lifecycle.models import ActionPreauthorization, Project, Requirement, ReviewTask
from lifecycle.services.approvals import APPROVE_DEPLOYMENT, APPROVE_STORIES, preauthorization_for
from lifecycle.services.budget_gate import budget_grace
from lifecycle.services.decisions import review_decide
from lifecycle.services.holds import change_hold
from lifecycle.states import Decision, ReviewKind

log = logging.getLogger("aiteam.progress")
AUTONOMOUS = Actor.policy("autonomous")  # the operator's AITEAM_AUTONOMOUS
PREAUTHORIZED = Actor.policy("pre-authorized")  # a project's ActionPreauthorization
DECIDED_AT_OPEN = {ReviewKind.STORIES_APPROVAL: APPROVE_STORIES, ReviewKind.DEPLOYMENT_APPROVAL: APPROVE_DEPLOYMENT}
POLICY_OPTIONS = {"terminate": Decision.REJECT, "approve_partial": Decision.APPROVE,
                  "override_budget": Decision.OVERRIDE_BUDGET}


def autonomous_decide(task: ReviewTask) -> None:
    """Decide a newly opened task that was decided in advance (see the module's docstring); leave every other
    task to people."""
    if task.kind == ReviewKind.BUDGET_EXHAUSTED:
        if settings.AITEAM_AUTONOMOUS:
            budget_policy_decide(task)
        return
    action = DECIDED_AT_OPEN.get(task.kind)
    if action is None or not task.is_pending:
        return
    grant = preauthorization_for(_project(task).pk, action)
    if grant is not None:
        if task.kind == ReviewKind.DEPLOYMENT_APPROVAL and (held := change_hold(task)):
            log.info("the pre-authorization of %s leaves %s to a person: %s", action, task, held)
            return
        _approve(task, PREAUTHORIZED, _granted(grant), {"action": action, "preauthorization": grant.pk,
                                                        "granted_by": getattr(grant.granted_by, "username", None)})
    elif action == APPROVE_STORIES and settings.AITEAM_AUTONOMOUS:
        _approve(task, AUTONOMOUS, f"autonomous mode (AITEAM_AUTONOMOUS=true) pre-authorizes {action}",
                 {"action": action, "preauthorization": "AITEAM_AUTONOMOUS"})


def _approve(task: ReviewTask, actor: Actor, reason: str, preauthorization: dict[str, Any]) -> None:
    who = "autonomous mode" if actor == AUTONOMOUS else "pre-authorization"
    log.info("%s: approving %s on the reviewer's behalf (%s)", who, task, reason)
    review_decide(task_id=task.pk, actor=actor, decision=Decision.APPROVE, reason=reason,
                  origin={"preauthorization": preauthorization})


def _granted(grant: ActionPreauthorization) -> str:
    by = f", granted by {grant.granted_by.username}" if grant.granted_by else ""
    return f"pre-authorized for the project: {grant.action}{by}"


def _project(task: ReviewTask) -> Project:
    return Project.objects.select_related("organization").get(requirements__pk=task.requirement_id)


def deployment_hold(task: ReviewTask) -> str:
    """Why this deployment waits for a person, or "" when the project pre-authorized it and nothing holds it."""
    project = _project(task)
    if preauthorization_for(project.pk, APPROVE_DEPLOYMENT) is None:
        return f"project {project} has not pre-authorized {APPROVE_DEPLOYMENT}"
    return change_hold(task)


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


def deployment_approve_at_terminal(requirement: Requirement, user: Any, *, command: str) -> str:
    """The operator's own decision (`<command> --approve-deployment`) on a deployment left open: approved as
    `user` via the CLI, with why it waited in the reason. Returns that why, or "" when no deployment waits."""
    task = requirement.review_tasks.pending().filter(kind=ReviewKind.DEPLOYMENT_APPROVAL).first()
    if task is None:
        return ""
    held = deployment_hold(task) or "it was pre-authorized after the gate opened"
    review_decide(task_id=task.pk, actor=Actor.human(user, "cli"), decision=Decision.APPROVE,
                  reason=f"approved at the terminal with {command} --approve-deployment; held: {held}")
    return held
