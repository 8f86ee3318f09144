"""Event subscribers. Each is idempotent: re-delivering an event changes nothing more."""
from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings

from aiteam.db import by_pk
from lifecycle.actors import Actor
from lifecycle.models import OutboxEvent, Requirement, ReviewTask
from lifecycle.notifications import handlers as notifying
from lifecycle.services import replays, reviews, steps
from lifecycle.states import Decision, ReviewKind

log = logging.getLogger("aiteam.progress")
Handler = Callable[[OutboxEvent], None]
AUTONOMOUS = Actor.policy("autonomous")


def schedule_business_analyst(event: OutboxEvent) -> None:
    steps.step_schedule(requirement_id=event.requirement_id, key=steps.BA_STORIES, attempt=event.payload["round"])


def schedule_architect(event: OutboxEvent) -> None:
    steps.step_schedule(requirement_id=event.requirement_id, key=steps.ARCHITECT, attempt=1)


def start_quality_gate(event: OutboxEvent) -> None:
    from lifecycle.services.quality import start_quality_gate as start

    start(by_pk.get(Requirement, event.requirement_id))


def refresh_digest(event: OutboxEvent) -> None:
    from lifecycle.services.digest import digest_refresh

    digest_refresh(by_pk.get(Requirement, event.requirement_id))


# Gates the operator pre-authorizes in autonomous mode; every decision is logged as the policy's.
AUTONOMOUS_KINDS = {ReviewKind.STORIES_APPROVAL, ReviewKind.DEPLOYMENT_APPROVAL}


def announce_review_task(event: OutboxEvent) -> None:
    task = ReviewTask.objects.select_related("requirement").get(pk=event.payload["review_task"])
    log.info("review task opened: %s — %s", task, task.question)
    if task.requirement.replay_of_id:  # a replay's gates get the source's recorded decisions, nothing else
        replays.replay_review_answer(task)
        return
    if settings.AITEAM_AUTONOMOUS and task.kind == ReviewKind.BUDGET_EXHAUSTED:
        from lifecycle.services.budget_gate import budget_policy_decide

        budget_policy_decide(task)
        return
    if settings.AITEAM_AUTONOMOUS and task.kind in AUTONOMOUS_KINDS and task.is_pending:
        log.info("autonomous mode: approving %s on the reviewer's behalf", task)
        reviews.review_decide(task_id=task.pk, actor=AUTONOMOUS, decision=Decision.APPROVE,
                              reason="autonomous mode (AITEAM_AUTONOMOUS=true)")


def compare_replay(event: OutboxEvent) -> None:
    """A replay that finished is compared with its source (the result shows in the admin and the API)."""
    replay = Requirement.objects.filter(pk=event.requirement_id, replay_of__isnull=False).first()
    if replay is not None:
        replays.replay_compare(replay)


HANDLERS: dict[str, list[Handler]] = {
    "RequirementClarified": [schedule_business_analyst],
    "StoriesReworkRequested": [schedule_business_analyst],
    "ReviewTaskOpened": [announce_review_task, notifying.queue_notifications, refresh_digest],
    "ReviewTaskReminded": [notifying.queue_notifications],
    "ReviewTaskEscalated": [notifying.queue_notifications],
    "ReviewTaskAssigned": [notifying.queue_notifications],
    "ReviewTaskDecidedByPolicy": [notifying.queue_notifications],
    "StoriesApproved": [schedule_architect],
    "CodeReviewPassed": [start_quality_gate],
    "TestsFailed": [refresh_digest],
    "SelfTestsFailed": [refresh_digest],
    "Deployed": [refresh_digest, compare_replay],
    "DeliveryFailed": [refresh_digest],
    "RequirementCancelled": [refresh_digest, compare_replay],
}


def handlers_for(name: str) -> list[Handler]:
    return HANDLERS.get(name, [])
