"""Subject and body of each notification, from templates/notifications/<kind>.txt (first line = subject)."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse

from lifecycle.models import ReviewTask

KINDS = ("review_task_opened", "requirement_blocked", "requirement_escalated", "review_task_reminder",
         "review_task_escalated", "review_task_assigned", "review_task_decided_by_policy")


def task_url(task: ReviewTask) -> str:
    return settings.AITEAM_PUBLIC_URL + reverse("admin:lifecycle_reviewtask_change", args=[task.pk])


def render(kind: str, task: ReviewTask, **extra: Any) -> tuple[str, str]:
    if kind not in KINDS:
        raise ValueError(f"unknown notification kind {kind!r}")
    return render_text(kind, {"task": task, "requirement": task.requirement, "url": task_url(task), **extra})


def render_text(kind: str, context: dict[str, Any]) -> tuple[str, str]:
    """templates/notifications/<kind>.txt: its first line the subject, the rest the body."""
    text = render_to_string(f"notifications/{kind}.txt", context)
    subject, _, body = text.strip().partition("\n")
    return " ".join(subject.split())[:300], body.strip() + "\n"
