"""Outbox subscribers that notify people.

The subscriber in the relay only queues `notify_for_event` after the relay commits: working
out recipients and rendering messages happens in that task, never in the relay's transaction,
so a notification can neither fail nor slow the handlers that move the pipeline on. The task
is idempotent (one Notification row per event, channel and recipient).
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction

from lifecycle.models import OutboxEvent, ReviewTask
from lifecycle.notifications import recipients
from lifecycle.notifications.delivery import notify
from lifecycle.states import ReviewKind

log = logging.getLogger(__name__)
OPENED_AS = {ReviewKind.CLARIFICATION: "requirement_blocked", ReviewKind.ESCALATION: "requirement_escalated",
             ReviewKind.BUDGET_EXHAUSTED: "requirement_escalated"}


def queue_notifications(event: OutboxEvent) -> None:
    """The outbox subscriber: cheap, and nothing it does can raise into the relay."""
    event_id = event.pk
    transaction.on_commit(lambda: _queue(event_id))


def _queue(event_id: int) -> None:
    from lifecycle.tasks import notify_for_event

    try:
        notify_for_event.delay(event_id)
    except Exception:  # a broker that is down, or (eagerly) a failing notifier: logged, the pipeline goes on
        log.exception("notifications for outbox event %s were not queued", event_id)


def notify_for_event(event_id: int) -> None:
    event = OutboxEvent.objects.filter(pk=event_id).first()
    notifier = NOTIFIERS.get(event.name) if event else None
    if notifier is None:
        return
    task = ReviewTask.objects.select_related(
        "requirement__project__organization", "organization", "assignee", "assignee_group").filter(
        pk=event.payload.get("review_task")).first()
    if task is not None and not task.requirement.replay_of_id:  # a replay's gates are a record, nobody's work
        with transaction.atomic():
            notifier(event, task)


def _opened(event: OutboxEvent, task: ReviewTask) -> None:
    if task.is_pending:
        notify(event_key=_key(event), kind=OPENED_AS.get(task.kind, "review_task_opened"), task=task,
               users=recipients.reviewers(task))


def _reminder(event: OutboxEvent, task: ReviewTask) -> None:
    if task.is_pending:
        notify(event_key=_key(event), kind="review_task_reminder", task=task, users=recipients.reviewers(task))


def _escalated(event: OutboxEvent, task: ReviewTask) -> None:
    if task.is_pending:
        notify(event_key=_key(event), kind="review_task_escalated", task=task,
               users=recipients.managers(task, event.payload.get("manager")))


def _assigned(event: OutboxEvent, task: ReviewTask) -> None:
    if not task.is_pending or (task.assignee_id and task.assignee_id == event.payload.get("by")):
        return  # claiming a task yourself needs no message
    notify(event_key=_key(event), kind="review_task_assigned", task=task, users=recipients.reviewers(task), webhook=False)


def _decided_by_policy(event: OutboxEvent, task: ReviewTask) -> None:
    users = [*recipients.managers(task), *recipients.holders(task)]
    notify(event_key=_key(event), kind="review_task_decided_by_policy", task=task, users=users)


def _key(event: OutboxEvent) -> str:
    return f"outbox:{event.pk}"


NOTIFIERS: dict[str, Callable[[OutboxEvent, ReviewTask], None]] = {
    "ReviewTaskOpened": _opened,
    "ReviewTaskReminded": _reminder,
    "ReviewTaskEscalated": _escalated,
    "ReviewTaskAssigned": _assigned,
    "ReviewTaskDecidedByPolicy": _decided_by_policy,
}
