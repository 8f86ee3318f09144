"""Outbox subscribers that notify people.

The subscriber in the relay only queues `notify_for_event` after the relay commits: working
out recipients and rendering messages happens in that task, never in the relay's transaction,
so a notification can neither fail nor slow the handlers that move the pipeline on. The task
is idempotent (one Notification row per event, channel and recipient).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from lifecycle.models import OutboxEvent, ReviewTask
from lifecycle.models.audit import NOTIFYING_EVENTS
from lifecycle.notifications import recipients
from lifecycle.notifications.promotions import promotion_proposed
from lifecycle.notifications.requeue import requeue_spaced
from lifecycle.notifications.sending import notify
from lifecycle.services import dispatch
from lifecycle.states import ReviewKind

log = logging.getLogger(__name__)
OPENED_AS = {ReviewKind.CLARIFICATION: "requirement_blocked", ReviewKind.ESCALATION: "requirement_escalated",
             ReviewKind.BUDGET_EXHAUSTED: "requirement_escalated"}


def queue_notifications(event: OutboxEvent) -> None:
    """The outbox subscriber: cheap, and nothing it does can raise into the relay."""
    event_id = event.pk
    transaction.on_commit(lambda: _queue(event_id))


def _queue(event_id: int) -> bool:
    try:
        dispatch.send_task(dispatch.NOTIFY_FOR_EVENT, event_id)
    except Exception:  # a broker that is down, or (eagerly) a failing notifier: logged, the pipeline goes on
        log.exception("notifications for outbox event %s were not queued", event_id)
        return False
    return True


def notify_for_event(event_id: int) -> None:
    """The event's notifications, and the event marked as notified, in one transaction (idempotent)."""
    event = OutboxEvent.objects.filter(pk=event_id).first()
    notifier = NOTIFIERS.get(event.name) if event else None
    if notifier is None:
        return
    with transaction.atomic():
        notifier(event)
        OutboxEvent.objects.filter(pk=event_id).update(notified_at=timezone.now())


def events_requeue_unnotified(*, now: datetime | None = None, limit: int = 200) -> int:
    """Queue notify_for_event again for relayed events whose notifications were never worked out: the broker
    was down when the relay committed, the worker died before queuing, or the task gave up. Those relayed
    within AITEAM_NOTIFY_LOST_AFTER_S are still on their way; the others are queued again spaced as
    lifecycle.notifications.requeue says (one that keeps failing: about ten tries in its day). After a day an
    event is left alone, with a warning on its last try."""
    now = now or timezone.now()
    day = timedelta(days=1)
    lost = OutboxEvent.objects.filter(
        notified_at=None, name__in=NOTIFYING_EVENTS, sent_at__isnull=False,
        sent_at__lt=now - timedelta(seconds=settings.AITEAM_NOTIFY_LOST_AFTER_S), sent_at__gte=now - day)
    events = requeue_spaced(lost, at="notify_requeue_at", since="sent_at", fields=["name"], now=now, limit=limit,
                            queue=lambda ids: [event_id for event_id in ids if not _queue(event_id)])
    for event in events:
        if event.notify_requeue_at >= event.sent_at + day:
            log.warning("outbox event %s (%s): notifications still not worked out %s after the relay; "
                        "queued for the last time", event.pk, event.name, now - event.sent_at)
    return len(events)


def _about_task(notifier: Callable[[OutboxEvent, ReviewTask], None]) -> Callable[[OutboxEvent], None]:
    """A review task's notifier, given the event's task; none for a task gone, or a replay's (its gates are a record,
    nobody's work)."""
    def notify_task(event: OutboxEvent) -> None:
        task = ReviewTask.objects.select_related(
            "requirement__project__organization", "organization", "assignee", "assignee_group").filter(
            pk=event.payload.get("review_task")).first()
        if task is not None and not task.requirement.replay_of_id:
            notifier(event, task)
    return notify_task


def _opened(event: OutboxEvent, task: ReviewTask) -> None:
    if task.is_pending:
        notify(event_key=_key(event), kind=OPENED_AS.get(task.kind, "review_task_opened"), task=task,
               users=recipients.reviewers(task))


def _reminder(event: OutboxEvent, task: ReviewTask) -> None:
    if task.is_pending:
        notify(event_key=_key(event), kind="review_task_reminder", task=task, users=recipients.reviewers(task))


def _escalated(event: OutboxEvent, task: ReviewTask) -> None:
    if task.is_pending:
        fallback = str(event.payload.get("fallback") or "")
        notify(event_key=_key(event), kind="review_task_escalated", task=task, context={"fallback": fallback},
               users=recipients.managers(task, event.payload.get("manager"), fallback=bool(fallback)))


def _assigned(event: OutboxEvent, task: ReviewTask) -> None:
    if not task.is_pending or (task.assignee_id and task.assignee_id == event.payload.get("by")):
        return  # claiming a task yourself needs no message
    notify(event_key=_key(event), kind="review_task_assigned", task=task, users=recipients.reviewers(task), webhook=False,
           context={"fallback": str(event.payload.get("fallback") or "")})


def _decided_by_policy(event: OutboxEvent, task: ReviewTask) -> None:
    users = [*recipients.managers(task), *recipients.holders(task)]
    notify(event_key=_key(event), kind="review_task_decided_by_policy", task=task, users=users)


def _key(event: OutboxEvent) -> str:
    return f"outbox:{event.pk}"


NOTIFIERS: dict[str, Callable[[OutboxEvent], None]] = {
    "ReviewTaskOpened": _about_task(_opened),
    "ReviewTaskReminded": _about_task(_reminder),
    "ReviewTaskEscalated": _about_task(_escalated),
    "ReviewTaskAssigned": _about_task(_assigned),
    "ReviewTaskDecidedByPolicy": _about_task(_decided_by_policy),
    "PromotionProposed": lambda event: promotion_proposed(event, event_key=_key(event)),
}
