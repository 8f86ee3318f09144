"""Subject and body of each notification, from templates/notifications/<kind>.txt (first line = subject).

Text that is not ours (a brief, a ticket's title, a review question, a model's answer, a person's message) reaches a
message only through `untrusted_line` (a title, a subject) or `untrusted_text` (several lines, quoted by `quoted`
where it could pass for ours): without control or format characters, it can neither start a line of its own nor hide
or reorder what it says. `render_text` cleans the whole rendered message that way too."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse

from agents.delivery.rich_text import without_controls, without_controls_by_line
from lifecycle.models import Requirement, ReviewTask

KINDS = ("review_task_opened", "requirement_blocked", "requirement_escalated", "review_task_reminder",
         "review_task_escalated", "review_task_assigned", "review_task_decided_by_policy")


def task_url(task: ReviewTask) -> str:
    return settings.AITEAM_PUBLIC_URL + reverse("admin:lifecycle_reviewtask_change", args=[task.pk])


def render(kind: str, task: ReviewTask, **extra: Any) -> tuple[str, str]:
    if kind not in KINDS:
        raise ValueError(f"unknown notification kind {kind!r}")
    return render_text(kind, {"task": task, "requirement": task.requirement, "title": requirement_title(task.requirement),
                              "question": quoted(task.question), "url": task_url(task), **extra})


def render_text(kind: str, context: dict[str, Any]) -> tuple[str, str]:
    """templates/notifications/<kind>.txt: its first line the subject (never a line break: an e-mail header), the
    rest the body."""
    text = render_to_string(f"notifications/{kind}.txt", context)
    subject, _, body = text.strip().partition("\n")
    return untrusted_line(subject)[:300], untrusted_text(body.strip()) + "\n"


def requirement_title(requirement: Requirement) -> str:
    """The requirement's title (its brief when it has none) for one line of a message."""
    return untrusted_line(requirement.title) or untrusted_line(requirement.brief)


def untrusted_line(text: str) -> str:
    """Someone's text for one line of a message: control and format characters (newlines, ESC, bidi overrides,
    zero-width characters) dropped, so it can neither start a line of its own nor hide or reorder what it says."""
    return " ".join(without_controls(text).split())


def untrusted_text(text: str) -> str:
    """Someone's text of several lines: each line break (CR LF, CR, U+2028…) one newline; in each line the characters
    `untrusted_line` drops are dropped, its indentation kept; trailing spaces and blank lines at either end trimmed."""
    return without_controls_by_line(text)


def quoted(text: str) -> str:
    """`untrusted_text`, each line quoted ("> "), so none of it can pass for the message's own words or links."""
    return "\n".join(f"> {line}".rstrip() for line in untrusted_text(text).split("\n"))

