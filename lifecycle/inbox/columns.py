"""The inbox list's columns, escaped with format_html (model output is never trusted as HTML)."""
from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.contrib import admin
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince, timeuntil

from lifecycle.models import ReviewTask

DUE_SOON = timedelta(hours=4)


@admin.display(description="task", ordering="kind")
def task_label(task: ReviewTask) -> str:
    return f"{task.get_kind_display()} #{task.round}"


@admin.display(description="requirement", ordering="requirement__title")
def requirement_label(task: ReviewTask) -> str:
    return format_html('{}<br><span class="inbox-muted">{}</span>', str(task.requirement), str(task.requirement.project))


@admin.display(description="state", ordering="state")
def state_label(task: ReviewTask) -> str:
    if task.decided_by_policy:
        return format_html('<span class="inbox-policy">{} by policy</span>', task.get_decision_display())
    if task.decision:
        return f"{task.get_state_display()}: {task.get_decision_display()}"
    return format_html('<span class="inbox-state inbox-state-{}">{}</span>', task.state, task.get_state_display())


@admin.display(description="assigned to")
def assigned_label(task: ReviewTask) -> str:
    if task.assignee_id:
        return str(task.assignee)
    if task.assignee_group_id:
        return f"group {task.assignee_group}"
    return format_html('<span class="inbox-muted">{}</span>', "unassigned")


@admin.display(description="SLA", ordering="sla_deadline")
def sla_label(task: ReviewTask) -> str:
    if not task.is_pending:
        return format_html('<span class="inbox-muted">{}</span>', "—")
    now = timezone.now()
    if task.sla_deadline < now:
        return format_html('<span class="sla sla-breached" title="due {}">overdue {}</span>',
                           task.sla_deadline.isoformat(timespec="minutes"), timesince(task.sla_deadline, now, depth=1))
    css = "sla-soon" if task.sla_deadline - now < DUE_SOON else "sla-ok"
    return format_html('<span class="sla {}" title="due {}">due in {}</span>', css,
                       task.sla_deadline.isoformat(timespec="minutes"), timeuntil(task.sla_deadline, now, depth=1))


@admin.display(description="waiting", ordering="created_at")
def age_label(task: ReviewTask) -> str:
    return timesince(task.created_at, depth=1)


def row_actions_for(user: Any) -> Callable[[ReviewTask], str]:
    """Claim / unassign buttons; they submit the page's separate row-action form (no nested forms)."""

    @admin.display(description="")
    def row_actions(task: ReviewTask) -> str:
        if not task.is_pending:
            return ""
        if task.assignee_id is None:
            return _button(task, "claim", "Claim")
        if task.assignee_id == user.pk:
            return _button(task, "unassign", "Unassign")
        return ""

    return row_actions


def _button(task: ReviewTask, action: str, label: str) -> str:
    url = reverse(f"admin:lifecycle_reviewtask_{action}", args=[task.pk])
    return format_html('<button type="submit" class="button inbox-row-button" form="inbox-row-action" '
                       'formaction="{}">{}</button>', url, label)
