"""Queue notifications for an event (idempotently), send one, and re-queue what is due again."""
from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from lifecycle.models import Notification, Project, ReviewTask
from lifecycle.notifications import messages
from lifecycle.notifications.channels import CHANNELS, ChannelError
from lifecycle.notifications.errors import ChannelRefused
from lifecycle.notifications.requeue import requeue_spaced
from lifecycle.notifications.webhook import webhook_url
from lifecycle.services import dispatch

log = logging.getLogger(__name__)
State = Notification.State


def notify(*, event_key: str, kind: str, task: ReviewTask, users: Iterable[Any], webhook: bool = True,
           context: dict[str, Any] | None = None) -> list[Notification]:
    """A review task's notifications: to `users`, and to its project's webhook unless `webhook` is False; `context`
    adds to the template's."""
    subject, body = messages.render(kind, task, **(context or {}))
    return notifications_queue(event_key=event_key, kind=kind, subject=subject, body=body, users=users,
                               webhook_of=task.requirement.project if webhook else None,
                               requirement_id=task.requirement_id, review_task=task)


def notifications_queue(*, event_key: str, kind: str, subject: str, body: str, users: Iterable[Any],
                        webhook_of: Project | None, **about: Any) -> list[Notification]:
    """One row per channel and recipient, created once per event (a relayed-again event adds none): an e-mail to each
    of `users` with an address, a post to the webhook of `webhook_of` (its own, else the operator's) when there is
    one. `about` names what the rows are about (requirement_id and review_task, or project)."""
    created = []
    for channel, recipient in _targets(users, webhook_of):
        row, new = Notification.objects.get_or_create(
            key=f"{event_key}:{channel}:{hashlib.sha256(recipient.encode()).hexdigest()[:24]}",
            defaults={"event": kind, "channel": channel, "recipient": recipient, "subject": subject, "body": body,
                      "next_attempt_at": timezone.now(), **about},
        )
        if new:
            created.append(row)
    if created:
        ids = [row.pk for row in created]
        transaction.on_commit(lambda: enqueue(ids))
    return created


def _targets(users: Iterable[Any], webhook_of: Project | None) -> list[tuple[str, str]]:
    channels = settings.AITEAM_NOTIFY_CHANNELS
    targets = []
    if "email" in channels:
        targets += [("email", u.email) for u in users if u.email]
    if webhook_of is not None and "webhook" in channels and webhook_url(webhook_of.settings):
        targets.append(("webhook", ""))
    return list(dict.fromkeys(targets))


def enqueue(ids: list[int]) -> list[int]:
    """Hand each row to a worker; a broker that is down only delays it (the beat re-queues due rows). Returns
    the ids that could not be queued."""
    failed = []
    for pk in ids:
        try:
            dispatch.send_task(dispatch.SEND_NOTIFICATION, pk)
        except Exception:
            log.exception("could not queue notification %s; the beat will", pk)
            failed.append(pk)
    return failed


def notification_send(notification_id: int, *, now: datetime | None = None) -> float | None:
    """Send one due notification; returns seconds until its retry when it failed and may be retried.

    The claim is a compare-and-set on `attempts`, which also makes it the claim's token: a send
    that outlasted its lease (and was claimed again by another worker) records nothing, so it can
    never overwrite the newer claim's outcome. Each channel's send is bounded well inside the lease.
    """
    now = now or timezone.now()
    note = (Notification.objects.select_related("requirement__project", "project")
            .filter(pk=notification_id, state=State.PENDING, next_attempt_at__lte=now).first())
    if note is None or not _claim(note, now):
        return None  # sent, given up, not due yet, or another worker is sending it
    try:
        CHANNELS[note.channel](note)
    except ChannelError as exc:
        return _failed(note, f"{type(exc).__name__}: {exc}", now, permanent=isinstance(exc, ChannelRefused),
                       wait_s=exc.retry_after_s)
    except Exception as exc:  # a channel's bug or an unknown channel: recorded and retried, never left pending
        log.exception("notification %s: %s channel raised", note.pk, note.channel)
        return _failed(note, f"{type(exc).__name__}: {exc}", now)
    _record(note, state=State.SENT, sent_at=timezone.now(), last_error="")
    return None


def claim_lease() -> timedelta:
    """How long a claim holds: well beyond the longest send (the webhook's deadline, the SMTP timeout)."""
    longest = max(settings.AITEAM_NOTIFY_TIMEOUT_S, settings.EMAIL_TIMEOUT or 0)
    return timedelta(seconds=longest * 2 + 30)


def _claim(note: Notification, now: datetime) -> bool:
    token = note.attempts + 1
    claimed = Notification.objects.filter(pk=note.pk, state=State.PENDING, attempts=note.attempts,
                                          next_attempt_at__lte=now).update(attempts=token, requeue_at=None,
                                                                           next_attempt_at=now + claim_lease())
    note.attempts = token
    return claimed == 1


def _record(note: Notification, **fields: Any) -> bool:
    """Record this claim's outcome unless a later claim took the row over (then that claim's outcome stands)."""
    if Notification.objects.filter(pk=note.pk, state=State.PENDING, attempts=note.attempts).update(**fields) == 1:
        return True
    log.warning("notification %s: attempt %d outlasted its claim; a later send owns the row", note.pk, note.attempts)
    return False


def backoff_seconds(attempts: int) -> float:
    return min(settings.AITEAM_NOTIFY_BACKOFF_S * 2 ** max(attempts - 1, 0), 3600.0)


def _failed(note: Notification, error: str, now: datetime, *, permanent: bool = False,
            wait_s: float | None = None) -> float | None:
    """Record a failed attempt: retried after the backoff, or after the wait the other side asked for when that is
    longer (at most an hour), until the attempts run out; given up at once when `permanent`."""
    if permanent or note.attempts >= settings.AITEAM_NOTIFY_MAX_ATTEMPTS:
        log.warning("notification %s failed (attempt %d), giving up: %s", note.pk, note.attempts, error)
        _record(note, state=State.FAILED, last_error=error[:2000])
        return None
    delay = max(backoff_seconds(note.attempts), min(wait_s or 0.0, 3600.0))
    log.info("notification %s failed (attempt %d), retrying in %.0fs: %s", note.pk, note.attempts, delay, error)
    if not _record(note, last_error=error[:2000], next_attempt_at=now + timedelta(seconds=delay)):
        return None  # the row is no longer ours to retry
    return delay


def notifications_requeue_due(*, now: datetime | None = None, limit: int = 500) -> int:
    """Queue pending rows whose attempt is due (a lost message, an eager run, a broker that was down), spaced
    as lifecycle.notifications.requeue says; a claim starts a row's spacing afresh."""
    now = now or timezone.now()
    due = Notification.objects.filter(state=State.PENDING, next_attempt_at__lte=now)
    return len(requeue_spaced(due, at="requeue_at", since="next_attempt_at", queue=enqueue, now=now, limit=limit))
