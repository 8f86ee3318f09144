"""Autonomous mode: the operator's policies decide gates on the reviewer's behalf, each decision logged and
recorded as the policy's, through the same review_decide a person uses.

It approves stories. A deployment only for a project that opted in (`Project.autonomous_deployments`), and never
one whose change adds or edits a CI workflow or uses `secrets.` in one: a workflow runs with the repository's
secrets and tokens, so a person reads it first (ADR 27). On an existing repository, nor one the scope guard flagged
(too large, or touching CI, dependency or settings files: ADR 35)."""
from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from agents.ci_paths import devops_owned
from agents.schemas import SourceFile
from lifecycle import budget_limits as bl
from lifecycle.actors import Actor
from lifecycle.errors import DomainError
from lifecycle.models import Project, Requirement, ReviewTask
from lifecycle.services.budget_gate import budget_grace
from lifecycle.services.decisions import review_decide
from lifecycle.services.development import workspace_files
from lifecycle.services.scope_guard import recorded_scope
from lifecycle.states import Decision, ReviewKind

log = logging.getLogger("aiteam.progress")
AUTONOMOUS = Actor.policy("autonomous")
POLICY_OPTIONS = {"terminate": Decision.REJECT, "approve_partial": Decision.APPROVE,
                  "override_budget": Decision.OVERRIDE_BUDGET}
SECRETS = "secrets."


def autonomous_decide(task: ReviewTask) -> None:
    """In autonomous mode, decide a newly opened task the policies cover; leave every other task to people."""
    if not settings.AITEAM_AUTONOMOUS:
        return
    if task.kind == ReviewKind.BUDGET_EXHAUSTED:
        budget_policy_decide(task)
    elif task.kind == ReviewKind.STORIES_APPROVAL and task.is_pending:
        _approve(task, "autonomous mode (AITEAM_AUTONOMOUS=true)")
    elif task.kind == ReviewKind.DEPLOYMENT_APPROVAL and task.is_pending:
        held = deployment_hold(task)
        if held:
            log.info("autonomous mode leaves %s to a person: %s", task, held)
            return
        _approve(task, "autonomous mode (AITEAM_AUTONOMOUS=true; the project opted in to autonomous deployments)")


def _approve(task: ReviewTask, reason: str) -> None:
    log.info("autonomous mode: approving %s on the reviewer's behalf", task)
    review_decide(task_id=task.pk, actor=AUTONOMOUS, decision=Decision.APPROVE, reason=reason)


def deployment_hold(task: ReviewTask) -> str:
    """Why autonomous mode may not approve this deployment, or "" when it may."""
    project = Project.objects.select_related("organization").get(requirements__pk=task.requirement_id)
    if not project.autonomous_deployments:
        return f"project {project} has not opted in to autonomous deployments"
    if held := scope_hold(task.context.get("scope") or recorded_scope(task.requirement_id)):
        return held
    # A new project's files are all the change's; on an existing repository, the files it adds or changes.
    return ci_hold(workspace_files(task.requirement_id))


def scope_hold(scope: dict[str, Any] | None) -> str:
    """Why the scope guard wants a person for this change (over the project's limits, CI, dependency or settings
    files: lifecycle/services/scope_guard.py), or ""; a new project's run has no measure."""
    reasons = (scope or {}).get("reasons") or []
    return f"the scope guard flagged the change: {'; '.join(reasons)}" if reasons else ""


def ci_hold(changed: list[SourceFile]) -> str:
    """Why a change to these files needs a person: a CI workflow it adds or edits, above all one using secrets."""
    ci = [f for f in changed if devops_owned(f.path)]
    using_secrets = [f.path for f in ci if SECRETS in f.content]
    if using_secrets:
        return f"the change's CI workflows use {SECRETS} ({', '.join(using_secrets)})"
    if ci:
        return f"the change adds or edits CI workflows ({', '.join(f.path for f in ci)})"
    return ""


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
