"""Subject and body of each notification, from templates/notifications/<kind>.txt (first line = subject)."""
from __future__ import annotations

import unicodedata
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


def untrusted_line(text: str) -> str:
    """Someone's text for one line of a message: control and format characters (newlines, ESC, bidi overrides,
    zero-width characters) dropped, so it can neither start a line of its own nor hide or reorder what it says."""
    kept = "".join(" " if unicodedata.category(c) == "Cc" else c for c in text if unicodedata.category(c) != "Cf")
    return " ".join(kept.split())
