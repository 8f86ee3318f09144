"""Helpers that drive a requirement through the real services, for tests on any database."""
from __future__ import annotations

from pathlib import Path

from django.conf import settings

from lifecycle.actors import Actor
from lifecycle.models import Requirement, ReviewTask
from lifecycle.services.decisions import review_decide
from lifecycle.services.intake import requirement_submit

SAMPLE = (Path(settings.BASE_DIR) / "agents/cassettes/sample_brief.md").read_text().partition("\n")[2].strip()
VAGUE = "Build something cool for our users, something cool that people love."


def submit(user, brief: str = SAMPLE, **kwargs) -> Requirement:
    requirement = requirement_submit(user=user, brief=brief, title="Reading list", **kwargs)
    return Requirement.objects.get(pk=requirement.pk)


def pending(requirement: Requirement, kind: str) -> ReviewTask:
    return requirement.review_tasks.pending().get(kind=kind)


def decide(task: ReviewTask, user, decision: str, **texts) -> ReviewTask:
    return review_decide(task_id=task.pk, actor=Actor.human(user, "api"), decision=decision, **texts)


def fresh(requirement: Requirement) -> Requirement:
    return Requirement.objects.get(pk=requirement.pk)


def transitions(requirement: Requirement, subject: str = "requirement") -> list[tuple[str, str, str]]:
    rows = requirement.transitions.filter(subject=subject).order_by("id")
    return [(t.from_state, t.event, t.to_state) for t in rows]
