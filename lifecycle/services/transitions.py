"""Run one guarded FSM transition and write its audit row; the only place that does."""
from __future__ import annotations

import logging
from typing import Any

from django.db import models
from django.utils import timezone
from django_fsm import TransitionNotAllowed

from lifecycle.actors import Actor
from lifecycle.errors import IllegalTransition
from lifecycle.models import Requirement, StateTransition

progress = logging.getLogger("aiteam.progress")
SUBJECTS = {"Requirement": "requirement", "UserStory": "story", "ReviewTask": "review_task"}


def transition(obj: models.Model, event: str, *, actor: Actor, metadata: dict[str, Any] | None = None) -> StateTransition:
    """Apply `event` to `obj` (already locked by the caller), save it and audit it.

    Raises IllegalTransition when the event is not allowed from the current state or a
    guard does not hold; nothing is written then.
    """
    method = getattr(obj, event)
    before = obj.state
    guards = _guard_names(method, before)
    try:
        method()  # django-fsm checks the source and runs the guards (some query) once; a refusal changes nothing
    except TransitionNotAllowed as exc:
        if exc.object is not obj:  # another object's refusal, from a receiver: not this transition's
            raise
        raise IllegalTransition(_refusal(obj, method, event)) from exc
    if isinstance(obj, Requirement):
        obj.state_changed_at = timezone.now()  # a self-loop too: it re-enters the state
    obj.save()
    requirement_id = obj.pk if isinstance(obj, Requirement) else obj.requirement_id
    row = StateTransition(
        requirement_id=requirement_id, subject=SUBJECTS[type(obj).__name__], subject_id=str(obj.pk),
        event=event, from_state=before, to_state=obj.state, actor_role=actor.role,
        actor_user=actor.user, via=actor.via, guard=guards, metadata=metadata or {},
    )
    row.save()
    if row.subject == "requirement":
        progress.info("requirement %s: %s → %s (%s by %s)", requirement_id, before, obj.state, event, actor)
    return row


def _transition_meta(method, state):
    return method._django_fsm.get_transition(state)


def _guard_names(method, state) -> str:
    meta = _transition_meta(method, state)
    return ",".join(c.__name__ for c in meta.conditions) if meta else ""


def _refusal(obj, method, event: str) -> str:
    name = type(obj).__name__
    meta = _transition_meta(method, obj.state)
    if meta is None:
        return f"{name} in state '{obj.state}' cannot '{event}'"
    failed = [c.__name__ for c in meta.conditions if not c(obj)]
    return f"{name} in state '{obj.state}' cannot '{event}': guard(s) {', '.join(failed)} do not hold"
