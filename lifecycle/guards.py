"""Transition guards: each reads the database around a requirement and answers yes or no.

Referenced by name from the FSM graph, so the audit row can say which guards held.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from lifecycle import step_keys
from lifecycle.playbooks import playbook_named
from lifecycle.states import (
    PENDING_REVIEW_STATES,
    ArtifactKind,
    Decision,
    ReviewKind,
    ReviewState,
    StepState,
    StoryState,
)

if TYPE_CHECKING:
    from lifecycle.models import Requirement

MAX_DEV_ATTEMPTS = 3


def has_requirement_doc(req: Requirement) -> bool:
    return req.docs.filter(version=req.clarification_round).exists()


def has_open_clarification(req: Requirement) -> bool:
    return req.review_tasks.filter(kind=ReviewKind.CLARIFICATION, state__in=PENDING_REVIEW_STATES).exists()


def clarification_answered(req: Requirement) -> bool:
    tasks = req.review_tasks.filter(kind=ReviewKind.CLARIFICATION)
    return tasks.exists() and not tasks.filter(state__in=PENDING_REVIEW_STATES).exists()


def has_draft_stories(req: Requirement) -> bool:
    return req.stories.filter(round=req.story_round, state=StoryState.DRAFT).exists()


def stories_rejected(req: Requirement) -> bool:
    current = req.stories.filter(round=req.story_round)
    return current.exists() and not current.exclude(state=StoryState.REJECTED).exists()


def stories_approved_by_human(req: Requirement) -> bool:
    """Every story of the current round approved, by a reviewer or by logged autonomous policy."""
    current = req.stories.filter(round=req.story_round)
    approved = current.filter(state=StoryState.APPROVED).exclude(decided_by=None, decided_by_policy="")
    return current.exists() and approved.count() == current.count()


def has_approved_spec(req: Requirement) -> bool:
    return req.artifacts.filter(kind=ArtifactKind.TECHNICAL_SPEC, approved=True).exists()


def has_implementation_plan(req: Requirement) -> bool:
    return req.artifacts.filter(kind=ArtifactKind.IMPLEMENTATION_PLAN).exists()


def self_tests_passing(req: Requirement) -> bool:
    report = req.artifacts.filter(kind=ArtifactKind.TEST_REPORT, name="self_test").order_by("-created_at").first()
    return bool(report and report.metadata.get("ok"))


def attempts_left(req: Requirement) -> bool:
    return req.dev_attempts < MAX_DEV_ATTEMPTS and not req.budget_exhausted


def attempts_or_budget_exhausted(req: Requirement) -> bool:
    return req.dev_attempts >= MAX_DEV_ATTEMPTS or req.budget_exhausted


def failure_routed_to_human(req: Requirement) -> bool:
    """The failure classifier's latest route for this requirement sends it to a human (e.g. the same failure
    again after a fix): escalate now rather than burn the remaining attempts."""
    latest = req.failure_routes.order_by("-id").values_list("route", flat=True).first()
    return latest == "human"


def escalation_due(req: Requirement) -> bool:
    return attempts_or_budget_exhausted(req) or failure_routed_to_human(req)


def budget_is_exhausted(req: Requirement) -> bool:
    return req.budget_exhausted


def budget_decided(req: Requirement) -> bool:
    """A human (or the logged policy) decided the budget task: the budget has room again and the state to go
    back to is known."""
    pending = req.review_tasks.filter(kind=ReviewKind.BUDGET_EXHAUSTED, state__in=PENDING_REVIEW_STATES)
    return bool(req.budget_paused_from) and not req.budget_exhausted and not pending.exists()


def escalation_resolved(req: Requirement) -> bool:
    tasks = req.review_tasks.filter(kind=ReviewKind.ESCALATION)
    return tasks.filter(state=ReviewState.RESOLVED).exists() and not tasks.filter(state__in=PENDING_REVIEW_STATES).exists()


def deployment_approved_by_human(req: Requirement) -> bool:
    """The latest deployment task approved by a reviewer, or by the project's logged pre-authorization (ADR 36), or
    (in a replay only) by the `replay` policy re-applying the source run's recorded approval."""
    task = req.review_tasks.filter(kind=ReviewKind.DEPLOYMENT_APPROVAL).order_by("-created_at").first()
    approved = task and task.state == ReviewState.RESOLVED and task.decision == Decision.APPROVE
    # "autonomous" approved deployments before migration 0030: one may still be delivering.
    replayed = bool(req.replay_of_id) and task is not None and task.decided_by_policy == "replay"
    return bool(approved and (task.decided_by_id or task.decided_by_policy in ("pre-authorized", "autonomous") or replayed))


def delivery_succeeded(req: Requirement) -> bool:
    return req.artifacts.filter(kind=ArtifactKind.DELIVERY, metadata__succeeded=True).exists()



def playbook_writes_stories(req: Requirement) -> bool:
    return playbook_named(req.playbook).writes_stories


def playbook_still_open(req: Requirement) -> bool:
    """A reviewer may still change the playbook: the Product Owner's triage is not under way, and neither design
    nor planning has started (their steps are scheduled once per requirement: a second start would find them)."""
    busy_triage = req.steps.filter(key=step_keys.PO_TRIAGE, state__in=(StepState.QUEUED, StepState.RUNNING))
    started = (step_keys.ARCHITECT, step_keys.LOCALIZE, step_keys.PLAN)  # localizing is the plan's first step
    return not busy_triage.exists() and not req.steps.filter(key__in=started).exists()


def playbook_skips_stories(req: Requirement) -> bool:
    return not playbook_named(req.playbook).writes_stories


def ticket_ready(req: Requirement) -> bool:
    """The current clarified ticket states acceptance criteria: enough to plan a bug fix from."""
    doc = req.docs.filter(version=req.clarification_round).first()
    return bool(doc and doc.acceptance_criteria)
