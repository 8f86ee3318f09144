"""Beat and notification tasks: thin wrappers around the services that own the work."""
from celery import shared_task
from celery.signals import task_postrun, task_prerun
from django.conf import settings
from django.db import DatabaseError, close_old_connections

from lifecycle.notifications import handlers as notifying
from lifecycle.notifications import sending
from lifecycle.notifications.conversation_mail import conversation_digests_queue
from lifecycle.replay.runs import replays_sweep
from lifecycle.services import answering, leases, outbox, sla
from lifecycle.services.digest import digests_refresh_all


@task_prerun.connect
@task_postrun.connect
def _close_old_connections(task=None, **kwargs) -> None:
    """As Django does around a request: this thread's connection is dropped once broken or past CONN_MAX_AGE, and
    checked before its next use (CONN_HEALTH_CHECKS). Each thread of a threads pool has its own connection. An
    eager task runs inside its caller's transaction, whose connection is the caller's to keep."""
    if task is not None and not task.request.is_eager:
        close_old_connections()


@shared_task(ignore_result=True)
def relay_outbox() -> int:
    return outbox.relay()


@shared_task(ignore_result=True)
def reap_steps() -> int:
    return len(leases.steps_reap())


@shared_task(ignore_result=True)
def compare_settled_replays() -> int:
    return replays_sweep()


@shared_task(ignore_result=True)
def refresh_status_digests() -> int:
    """The PM's daily digest for every requirement still in flight (events refresh it in between)."""
    return digests_refresh_all()


@shared_task(ignore_result=True)
def sweep_review_slas() -> dict[str, int]:
    """Every minute (PeriodicTask "every-minute-sweep-review-slas"); safe to run on two beats at once."""
    return dict(sla.review_sweep(limit=settings.AITEAM_SLA_SWEEP_BATCH))


@shared_task(ignore_result=True, acks_late=True, autoretry_for=(DatabaseError,), retry_backoff=5, max_retries=5)
def notify_for_event(event_id: int) -> None:
    """Who hears about an outbox event and what they are told: Notification rows, then their sending."""
    notifying.notify_for_event(event_id)


@shared_task(ignore_result=True, acks_late=True)
def answer_message(message_id: int) -> None:
    """The assistant's answer to a message (lifecycle.services.answering): a worker on the llm queue."""
    answering.answer_message(message_id)


@shared_task(ignore_result=True)
def requeue_answers() -> int:
    """Every minute: answers never picked up, or whose worker was lost."""
    return answering.answers_requeue()


@shared_task(ignore_result=True)
def send_conversation_digests() -> int:
    """Daily: the conversation digest of each person who chose it (lifecycle.notifications.conversation_mail)."""
    return conversation_digests_queue()


@shared_task(ignore_result=True)
def requeue_notifications() -> int:
    """Every minute: notifications due to be sent, and events whose notifications were lost on the way."""
    return sending.notifications_requeue_due() + notifying.events_requeue_unnotified()


# Registered under its former name: messages queued as deliver_notification before an upgrade still find it.
@shared_task(bind=True, ignore_result=True, acks_late=True, max_retries=None, name="lifecycle.tasks.deliver_notification")
def send_notification(self, notification_id: int) -> None:
    """Send one notification; a channel failure comes back after a backoff (the row counts the attempts).

    Eagerly (embedded, tests) there is no broker to come back through and retrying inline would
    hold up the request that caused the notification: the row waits for the beat's requeue instead.
    """
    retry_in = sending.notification_send(notification_id)
    if retry_in is not None and not self.request.is_eager:
        raise self.retry(countdown=retry_in)
