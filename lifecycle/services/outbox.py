"""The transactional outbox: emit inside the state change's transaction, relay after commit.

Relaying claims one row at a time with SELECT … FOR UPDATE SKIP LOCKED and marks it sent in
the same transaction as its handlers' writes, so a relay killed half-way leaves the row
unsent and its writes rolled back: the next relay (on commit or the beat) applies it once.
Two relays never take the same row. Handlers must be idempotent all the same, because
what they queue after commit (Celery messages) is at-least-once. An event nobody subscribes
to is delivered to all none of its handlers when it is written: it is stored as sent, and no
relay runs for it.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from lifecycle.models import OutboxEvent, Requirement

log = logging.getLogger(__name__)
RELAY_BATCH = 100


Handler = Callable[[OutboxEvent], None]
_subscribers: dict[str, list[Handler]] = {}


def subscribe(handlers: dict[str, list[Handler]]) -> None:
    """Set who handles which event: lifecycle.handlers.HANDLERS, once, from the app's ready() (the services that
    emit events never import their subscribers, which call those services)."""
    global _subscribers
    _subscribers = handlers


def handlers_for(name: str) -> list[Handler]:
    return _subscribers.get(name, [])


def emit(requirement: Requirement | None, name: str, payload: dict[str, Any] | None = None) -> OutboxEvent:
    """Record an event in the caller's transaction and relay it once that commits."""
    subscribed = bool(handlers_for(name))
    event = OutboxEvent(requirement=requirement, name=name, payload=payload or {},
                        sent_at=None if subscribed else timezone.now())
    event.save()
    if subscribed:
        # robust: the change is committed; a relay error after it must not fail the caller (the beat re-relays)
        transaction.on_commit(lambda: relay(ids=[event.pk]), robust=True)
    return event


def relay(ids: list[int] | None = None, limit: int = RELAY_BATCH) -> int:
    """Deliver unsent events (the given ones, or the oldest `limit`); returns how many were delivered."""
    if ids is not None:  # just emitted: _relay_one skips any that another relay already sent
        return sum(_relay_one(pk) for pk in ids[:limit])
    # Fewest failed attempts first: events that keep failing must not starve newer ones of the batch.
    pending = OutboxEvent.objects.filter(sent_at=None).order_by("relay_attempts", "id")
    return sum(_relay_one(pk) for pk in pending.values_list("id", flat=True)[:limit])


def _relay_one(pk: int) -> bool:
    try:
        with transaction.atomic():
            event = OutboxEvent.objects.select_for_update(skip_locked=True).filter(pk=pk, sent_at=None).first()
            if event is None:
                return False  # another relay has it, or it is already sent
            for handler in handlers_for(event.name):
                handler(event)
            event.sent_at = timezone.now()
            event.save(update_fields=["sent_at"])
    except Exception as exc:  # a failing handler must not block other events; the beat retries it
        log.exception("relaying outbox event %s failed", pk)
        OutboxEvent.objects.filter(pk=pk).update(relay_attempts=F("relay_attempts") + 1, last_error=str(exc)[:2000])
        return False
    return True
