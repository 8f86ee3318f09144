"""The SLA sweeper: remind, reassign, escalate or decide by policy the review tasks that are due.

The beat runs `review_sweep` every minute. It reads the ids of due tasks through the
partial index `review_sweep_due` (pending tasks by next_sweep_at), then handles each in its
own transaction: the row is locked with FOR UPDATE SKIP LOCKED and re-checked as due, so
two sweepers running at once never act on the same task, and a task a sweeper has handled
is no longer due (its next_sweep_at moved on, or it is resolved). A failure on one task
is logged and retried at its next sweep; it never stops the others.

First time due (at the SLA deadline): the policy's action. Later: a reminder every
`remind_every_hours`. At `decide_by`: the policy's stated default decision, through the
same review_decide as a human's, marked as a policy decision; except on a task the policy
never decides (a deployment approval: ReviewTask.policy_decides), which is escalated then
(reminded if it is already) and keeps being reminded, left to a person, the audit row saying why.
"""
from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import Project, ReviewTask
from lifecycle.services.assignment import assignable_groups, decide_refusal, lock_task_requirement, project_deciders
from lifecycle.services.decisions import review_decide
from lifecycle.services.outbox import emit
from lifecycle.services.sla_policies import ReviewPolicy, policy_for
from lifecycle.services.transitions import transition
from lifecycle.states import SLA_POLICY_ROLE, ReviewKind, ReviewState

log = logging.getLogger("aiteam.progress")
SLA_POLICY = Actor.policy(SLA_POLICY_ROLE)
SWEEP_BATCH = 1000
EVERYONE = "everyone who may decide it"
FAILED_TASK_PAUSE = timedelta(minutes=15)


def review_sweep(*, now: datetime | None = None, limit: int = SWEEP_BATCH) -> Counter[str]:
    """Act on every task due at `now` (at most `limit`); returns how many got which action."""
    now = now or timezone.now()
    due = ReviewTask.objects.due_for_sweep(now).order_by("next_sweep_at").values_list("pk", flat=True)[:limit]
    done: Counter[str] = Counter()
    for task_id in list(due):
        try:
            action = review_sweep_one(task_id=task_id, now=now)
        except Exception:  # one broken task must not stop the sweep; it comes back after a pause
            log.exception("SLA sweep of review task %s failed", task_id)
            ReviewTask.objects.filter(pk=task_id).update(next_sweep_at=now + FAILED_TASK_PAUSE)
            action = "failed"
        if action:
            done[action] += 1
    return done


def review_sweep_one(*, task_id: Any, now: datetime) -> str | None:
    """Apply the policy to one task if it is still due and no other sweeper holds it; returns the action."""
    with transaction.atomic():
        if not lock_task_requirement(task_id, skip_locked=True):
            return None  # its requirement is busy (a decision, a claim, a step's apply): the next sweep comes back
        task = (ReviewTask.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("requirement", "organization").due_for_sweep(now).filter(pk=task_id).first())
        if task is None:
            return None  # another sweeper has it, or it was decided or handled meanwhile
        policy = task_policy(task)
        action = _next_action(task, policy, now)
        if action == "auto_decide" and review_auto_decide(task, policy, now):
            return action
        if action == "auto_decide":
            action = "remind"  # the default could not be applied (logged); keep reminding, retry next sweep
        upcoming = now + timedelta(hours=policy.remind_every_hours)
        task.escalation_count += 1
        task.next_sweep_at = min(upcoming, task.decide_by) if task.decide_by and task.decide_by > now else upcoming
        return ACTIONS[action](task, policy, now)


def task_policy(task: ReviewTask) -> ReviewPolicy:
    """The policy stated when the task opened; tasks from before policies existed get today's.

    A stated policy that no longer validates (stored before today's bounds) gives way to today's
    policy for the task's kind and project, logged: the task is swept, never failed forever.
    """
    if task.policy:
        try:
            return ReviewPolicy.model_validate(task.policy)
        except ValidationError as exc:
            log.error("the policy stated on %s is no longer valid, using the project's current one: %s", task, exc)
    return policy_for(task.kind, task.requirement.project.settings)


def _next_action(task: ReviewTask, policy: ReviewPolicy, now: datetime) -> str:
    if task.decide_by is not None and now >= task.decide_by:
        return "auto_decide" if task.policy_decides else "escalate"
    if task.escalation_count == 0:  # a policy never decides what it may not, whatever its deadline says (ADR 44)
        return "escalate" if policy.action == "auto_decide" and not task.policy_decides else policy.action
    return "remind"


def review_remind(task: ReviewTask, policy: ReviewPolicy, now: datetime) -> str:
    transition(task, "remind", actor=SLA_POLICY, metadata=_meta(task, policy, now))
    emit(task.requirement, "ReviewTaskReminded", {"review_task": str(task.pk), "reminder": task.escalation_count})
    return "remind"


def review_reassign(task: ReviewTask, policy: ReviewPolicy, now: datetime) -> str:
    """Hand the task to the policy's group; a group none of whose members may decide it (the assign form's own
    check) hands it instead to everyone who may decide it, said in the audit row and the message."""
    group = Group.objects.filter(name=policy.group).first()
    if group is None:
        log.error("SLA policy of %s names group %r, which does not exist: reminding instead", task, policy.group)
        return review_remind(task, policy, now)
    previous = str(task.assignee or task.assignee_group or "nobody")
    fallback = ""
    if not assignable_groups(task).filter(pk=group.pk).exists():
        fallback = f"the policy's group {group} has no member who may decide it, so it went to {EVERYONE}"
        log.error("SLA policy of %s names group %r: %s", task, policy.group, fallback)
    task.assignee, task.assignee_group = None, None if fallback else group
    transition(task, "hand_to_group", actor=SLA_POLICY, metadata={
        **_meta(task, policy, now), "previous": previous, "group": EVERYONE if fallback else group.name,
        **({"fallback": fallback} if fallback else {})})
    emit(task.requirement, "ReviewTaskAssigned", {"review_task": str(task.pk), "by": None,
                                                  **({"fallback": fallback} if fallback else {})})
    return "reassign"


def review_escalate(task: ReviewTask, policy: ReviewPolicy, now: datetime) -> str:
    """Escalate to the policy's manager when they may decide the task (the check a person's assignment gets); no
    manager named tells the organization's admins; a manager who may not decide it gives way to everyone who may."""
    if task.state == ReviewState.ESCALATED:
        return review_remind(task, policy, now)
    manager, fallback = _manager(task, policy)
    if manager is not None:
        task.assignee, task.assignee_group = manager, None
    elif fallback:
        task.assignee, task.assignee_group = None, None
    task.escalated_at = now
    told = manager.username if manager else EVERYONE if fallback else "organization admins"
    transition(task, "escalate", actor=SLA_POLICY, metadata={**_meta(task, policy, now), "manager": told,
                                                             **({"fallback": fallback} if fallback else {})})
    emit(task.requirement, "ReviewTaskEscalated", {"review_task": str(task.pk), "manager": getattr(manager, "pk", None),
                                                   **({"fallback": fallback} if fallback else {})})
    return "escalate"


def review_auto_decide(task: ReviewTask, policy: ReviewPolicy, now: datetime) -> bool:
    """Decide with the policy's stated default (reject where the task does not offer it); False (logged) when the
    flow refuses it right now."""
    decision, _ = policy_decision(task, policy)
    text = default_text(task, policy)
    texts = {"feedback": text} if decision == "request_changes" else {"reason": text}
    try:
        review_decide(task_id=task.pk, actor=SLA_POLICY, decision=decision, **texts)
    except (DomainError, IllegalTransition, NotPermitted):
        log.exception("SLA policy could not decide %s with '%s'", task, decision)
        return False
    emit(task.requirement, "ReviewTaskDecidedByPolicy", {"review_task": str(task.pk), "decision": decision})
    return True


def policy_decision(task: ReviewTask, policy: ReviewPolicy | None = None) -> tuple[str, str]:
    """The decision the policy applies at the limit, and why it is not the stated default ("" when it is): a default
    the task does not offer (approve, on a budget task with no partial output) gives way to reject, the safe
    default, since the policy's check at save cannot know the task."""
    policy = policy or task_policy(task)
    default = policy.default_decision
    if not task.options or default in task.options:
        return default, ""
    return "reject", f"its default, {default}, is not an option for this task, so it rejects it"


def default_text(task: ReviewTask, policy: ReviewPolicy) -> str:
    decision, fallback = policy_decision(task, policy)
    stated = f" {policy.default_reason}" if policy.default_reason and not fallback else ""
    applied = (f"could not apply its stated default, {policy.default_decision} (not an option for this task), "
               f"so it rejected it (the safe default)" if fallback else f"applied its stated default, {decision}")
    return (f"No reviewer decided within {policy.decide_after_hours:g} h: the {task.get_kind_display()} SLA policy "
            f"{applied}.{stated}")


def _manager(task: ReviewTask, policy: ReviewPolicy) -> tuple[Any, str]:
    """The named manager if they may decide the task (decide_refusal with its project, as review_assign checks),
    and ""; else None and why everyone who may decide it is told instead ("" when no manager is named)."""
    if not policy.manager:
        return None, ""
    manager, refusal = manager_checked(policy.manager, task.organization, task.requirement.project_id)
    if refusal:
        fallback = f"the policy's manager may not decide it ({refusal}), so it went to {EVERYONE}"
        log.error("SLA policy of %s names manager %r: %s", task, policy.manager, fallback)
        return None, fallback
    return manager, ""


def manager_checked(username: str, organization: Any, project_id: Any) -> tuple[Any, str]:
    """The active user a policy names as its manager, and why they may not decide the project's review tasks ("" when
    they may)."""
    manager = get_user_model().objects.filter(username=username, is_active=True).first()
    if manager is None:
        return None, f"{username} is not an active user"
    return manager, decide_refusal(manager, organization, project_id=project_id)


def policy_contacts_refused(project: Project) -> list[str]:
    """Whom the project's SLA policies hand an overdue task but who cannot decide it, one line each naming the kinds
    and what the sweep does instead (review_escalate, review_reassign): said when the project is saved, which it does
    not block (the role or the group may come later). Read after the save: decide_refusal reads the stored
    reviewers group."""
    named: dict[tuple[str, str], list[str]] = {}
    for kind in ReviewKind.values:
        policy = policy_for(kind, project.settings)
        if policy.action == "escalate" and policy.manager:
            named.setdefault(("escalate", policy.manager), []).append(kind)
        elif policy.action == "reassign" and policy.group:
            named.setdefault(("reassign", policy.group), []).append(kind)
    lines = []
    for (action, name), kinds in named.items():
        if action == "escalate":
            why, instead = manager_checked(name, project.organization, project.pk)[1], f"goes to {EVERYONE}"
            told = f"escalates to {name}, who may not decide this project's review tasks"
        else:
            why, instead = _group_refusal(name, project)
            told = f"reassigns to the group {name}, which cannot take this project's review tasks"
        if why:
            lines.append(f"The SLA policy of {', '.join(kinds)} {told}: {why}. An overdue task {instead} instead.")
    return lines


def _group_refusal(name: str, project: Project) -> tuple[str, str]:
    """Why the group cannot take the project's tasks ("" when it can), and what review_reassign does instead."""
    group = Group.objects.filter(name=name).first()
    if group is None:
        return f"there is no group '{name}'", "gets reminders"
    if not project_deciders(project.organization_id, project.settings).filter(groups=group).exists():
        return f"no member of '{name}' may decide them", f"goes to {EVERYONE}"
    return "", ""


def _meta(task: ReviewTask, policy: ReviewPolicy, now: datetime) -> dict[str, Any]:
    overdue_h = (now - task.sla_deadline).total_seconds() / 3600
    past_limit = not task.policy_decides and task.decide_by is not None and now >= task.decide_by
    return {"policy": policy.action, "overdue_hours": round(overdue_h, 2), "sweep": task.escalation_count,
            **({"limit": waits_text(task)} if past_limit else {})}


def waits_text(task: ReviewTask) -> str:
    """Why a task the policy never decides still waits past its limit (the audit row's `limit`)."""
    return (f"No reviewer decided by {task.decide_by:%Y-%m-%d %H:%M} UTC, and the SLA policy never decides a "
            f"{task.get_kind_display()}: it waits for a person to approve it, reject it with a reason or cancel "
            f"the requirement")


# Each action runs inside review_sweep_one's transaction, on the row it locked and re-checked as due.
ACTIONS = {"remind": review_remind, "reassign": review_reassign, "escalate": review_escalate}
