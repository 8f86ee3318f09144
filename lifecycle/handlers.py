"""Event subscribers. Each is idempotent: re-delivering an event changes nothing more."""
from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings

from lifecycle.actors import Actor
from lifecycle.models import OutboxEvent, ReviewTask
from lifecycle.services import reviews, steps
from lifecycle.states import Decision, ReviewKind

log = logging.getLogger("aiteam.progress")
Handler = Callable[[OutboxEvent], None]
AUTONOMOUS = Actor.policy("autonomous")


def schedule_product_owner(event: OutboxEvent) -> None:
    steps.step_schedule(requirement_id=event.requirement_id, key=steps.PO_CLARIFY, attempt=event.payload["round"])


def schedule_business_analyst(event: OutboxEvent) -> None:
    steps.step_schedule(requirement_id=event.requirement_id, key=steps.BA_STORIES, attempt=event.payload["round"])


def announce_review_task(event: OutboxEvent) -> None:
    task = ReviewTask.objects.get(pk=event.payload["review_task"])
    log.info("review task opened: %s — %s", task, task.question)
    if settings.AITEAM_AUTONOMOUS and task.kind == ReviewKind.STORIES_APPROVAL and task.is_pending:
        log.info("autonomous mode: approving %s on the reviewer's behalf", task)
        reviews.review_decide(task_id=task.pk, actor=AUTONOMOUS, decision=Decision.APPROVE,
                              reason="autonomous mode (AITEAM_AUTONOMOUS=true)")


HANDLERS: dict[str, list[Handler]] = {
    "RequirementReceived": [schedule_product_owner],
    "RequirementClarified": [schedule_business_analyst],
    "StoriesReworkRequested": [schedule_business_analyst],
    "ReviewTaskOpened": [announce_review_task],
}


def handlers_for(name: str) -> list[Handler]:
    return HANDLERS.get(name, [])
