"""Event subscribers. Each is idempotent: re-delivering an event changes nothing more."""
from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction

from lifecycle import step_keys
from lifecycle.models import OutboxEvent, Requirement, ReviewTask
from lifecycle.notifications import handlers as notifying
from lifecycle.notifications.conversation_mail import conversation_mail_queue
from lifecycle.notifications.slack import queue_slack_post, queue_slack_refusal, queue_slack_start
from lifecycle.notifications.slack_updates import EVENTS as SLACK_UPDATING
from lifecycle.notifications.slack_updates import queue_slack_updates
from lifecycle.replay.runs import replay_compare, replay_review_answer
from lifecycle.services import quality, scheduling
from lifecycle.services.approvals import approvals_supersede
from lifecycle.services.autonomous import autonomous_decide
from lifecycle.services.digest import digest_refresh
from lifecycle.services.meta_eval_end import requirement_ended
from lifecycle.services.system_messages import SYSTEM_EVENTS, system_conversation_open
from lifecycle.ticket_comments import queue_ticket_comment

log = logging.getLogger("aiteam.progress")
Handler = Callable[[OutboxEvent], None]


def schedule_business_analyst(event: OutboxEvent) -> None:
    scheduling.step_schedule(requirement_id=event.requirement_id, key=step_keys.BA_STORIES, attempt=event.payload["round"])


def schedule_architect(event: OutboxEvent) -> None:
    scheduling.step_schedule(requirement_id=event.requirement_id, key=step_keys.ARCHITECT, attempt=1)


def start_quality_gate(event: OutboxEvent) -> None:
    quality.start_quality_gate(Requirement.objects.get(pk=event.requirement_id))


def refresh_digest(event: OutboxEvent) -> None:
    digest_refresh(Requirement.objects.get(pk=event.requirement_id))


def announce_review_task(event: OutboxEvent) -> None:
    task = ReviewTask.objects.select_related("requirement").get(pk=event.payload["review_task"])
    log.info("review task opened: %s — %s", task, task.question)
    if task.requirement.replay_of_id:  # a replay's gates get the source's recorded decisions, nothing else
        replay_review_answer(task)
        return
    autonomous_decide(task)


def compare_replay(event: OutboxEvent) -> None:
    """A replay that finished is compared with its source (the result shows in the admin and the API)."""
    replay = Requirement.objects.filter(pk=event.requirement_id, replay_of__isnull=False).first()
    if replay is not None:
        replay_compare(replay)


def supersede_approvals(event: OutboxEvent) -> None:
    """Requests the assistant made that can no longer do anything (their task was decided another way or expired,
    their requirement ended) close as superseded."""
    if event.requirement_id is not None:
        approvals_supersede(event.requirement_id)


def speak_first(event: OutboxEvent) -> None:
    """A system conversation for the event when it is an occasion (lifecycle.services.system_messages), its
    e-mails and its Slack post, in the relay's transaction: each happens once per event. In a savepoint: a failure
    here is logged and never holds back the handlers that move the requirement on."""
    try:
        with transaction.atomic():
            conversation = system_conversation_open(event)
            if conversation is not None:
                conversation_mail_queue(conversation)
                queue_slack_start(conversation)
    except Exception:
        log.exception("no system conversation for outbox event %s (%s)", event.pk, event.name)


HANDLERS: dict[str, list[Handler]] = {
    "RequirementClarified": [schedule_business_analyst],
    "StoriesReworkRequested": [schedule_business_analyst],
    "ReviewTaskOpened": [announce_review_task, notifying.queue_notifications, refresh_digest, queue_ticket_comment],
    "ReviewTaskReminded": [notifying.queue_notifications],
    "ReviewTaskEscalated": [notifying.queue_notifications],
    "ReviewTaskAssigned": [notifying.queue_notifications],
    "ReviewTaskDecidedByPolicy": [notifying.queue_notifications],
    "StoriesApproved": [schedule_architect],
    "CodeReviewPassed": [start_quality_gate],
    "TestsFailed": [refresh_digest],
    "SelfTestsFailed": [refresh_digest],
    "Deployed": [refresh_digest, compare_replay, queue_ticket_comment, requirement_ended],
    "DeliveryFailed": [refresh_digest],
    "RequirementCancelled": [refresh_digest, compare_replay, queue_ticket_comment, requirement_ended],
    # ticket comments (lifecycle/ticket_comments.py): work started, and a triaged question's answer or refusal
    "RepositoryPrepared": [queue_ticket_comment],
    "TicketAnswered": [queue_ticket_comment],
    "TicketRefused": [queue_ticket_comment],
    # an answer or a system line in a conversation bound to a Slack thread (lifecycle/notifications/slack.py)
    "MessageWritten": [queue_slack_post],
    # a person's Slack message the conversation refused: the thread is told why (lifecycle/notifications/slack.py)
    "SlackMessageRefused": [queue_slack_refusal],
    # a proposal announced to the project's owners (lifecycle/notifications/promotions.py)
    "PromotionProposed": [notifying.queue_notifications],
}
# a request to decide a task decided another way, or to cancel a requirement that ended, is closed
for _name in ("ReviewTaskResolved", "RequirementCancelled", "PlaybookChanged", "Deployed"):
    HANDLERS[_name] = [*HANDLERS.get(_name, []), supersede_approvals]
for _name in SYSTEM_EVENTS:
    HANDLERS[_name] = [*HANDLERS.get(_name, []), speak_first]
# a Slack post whose buttons decide what the event decided is rewritten (lifecycle/notifications/slack_updates.py)
for _name in SLACK_UPDATING:
    HANDLERS[_name] = [*HANDLERS.get(_name, []), queue_slack_updates]



