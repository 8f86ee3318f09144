"""Queue work for the workers by the task's registered name: services never import a task module (the tasks
import the services).

lifecycle.apps imports the task modules in every process, so every name is registered wherever work is queued;
through the registry, an eager app (the embedded default) runs the task at once, as Celery's send_task would not.
"""
from __future__ import annotations

from aiteam.celery import app
from lifecycle.step_keys import queue_for

RUN_STEP = "lifecycle.runner.run_step"
NOTIFY_FOR_EVENT = "lifecycle.tasks.notify_for_event"
SEND_NOTIFICATION = "lifecycle.tasks.deliver_notification"  # the name it had before it was send_notification


def send_step(step_id: int, key: str, *, countdown: float | None = None) -> None:
    app.tasks[RUN_STEP].apply_async((step_id,), queue=queue_for(key), countdown=countdown)


def send_task(name: str, *args) -> None:
    app.tasks[name].delay(*args)
