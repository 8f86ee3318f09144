"""Beat tasks: thin wrappers around the sweeping services."""
from celery import shared_task

from lifecycle.services import outbox, steps


@shared_task(ignore_result=True)
def relay_outbox() -> int:
    return outbox.relay()


@shared_task(ignore_result=True)
def reap_steps() -> int:
    return len(steps.steps_reap())
