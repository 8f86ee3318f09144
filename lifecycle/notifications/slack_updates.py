"""The `slack_update` channel: a Slack post that offered buttons is rewritten (chat.update) once what they decide
is decided, wherever that happened (a press in Slack, the admin, the API, an e-mail, an SLA policy, an expiry), so
it shows the decision and no button that could only answer 409.

An outbox subscriber turns the event that decided it into one Notification row per Slack post that offered its
buttons, keyed by the event and the post (relaying the event again adds none), in the relay's transaction; the
row is then sent like any notification (lifecycle/notifications/sending.py): claimed once, retried with backoff
while Slack's failure is transient (no answer, 429, 5xx), failed for good when not (message_not_found, a token
refused). The row names the post's row, never a text: the update shows what the post would show now
(lifecycle.notifications.slack.shown), so an update sent twice, late or after another shows the same thing. Two
updates of one post can still reach Slack out of order (the older drawing last): each draws the post again once
Slack took it and sends that while it differs.
A post not made yet is waited for (its own send shows what is decided by then); one that failed is not updated.
"""
from __future__ import annotations

import json
import logging

from django.db import transaction
from django.utils import timezone

from agents.delivery.slack import Row
from lifecycle.models import ActionApproval, Conversation, Message, Notification, OutboxEvent, ReviewTask
from lifecycle.notifications import slack
from lifecycle.notifications.errors import ChannelError, ChannelRefused
from lifecycle.states import ReviewState

log = logging.getLogger(__name__)
CHANNEL = "slack_update"
EXPIRING = ("RequirementCancelled", "PlaybookChanged")  # expire the requirement's waiting tasks: "expired_tasks"
EVENTS = ("ActionDecided", "ReviewTaskResolved", *EXPIRING)
SENDS = 3  # chat.update calls of one attempt at most, each showing what is decided by then


def queue_slack_updates(event: OutboxEvent) -> None:
    """The outbox subscriber: a row per Slack post that offered buttons for what the event decided."""
    created = [pk for post in _posts_about(event) if (pk := _queue_update(event, post))]
    if created:
        transaction.on_commit(lambda: slack.send_later(created))


def _posts_about(event: OutboxEvent) -> list[Notification]:
    payload = event.payload or {}
    if event.name == "ActionDecided":
        approval = ActionApproval.objects.select_related("tool_call").filter(pk=payload.get("approval")).first()
        if approval is None or approval.tool_call is None or approval.tool_call.message_id is None:
            return []
        prefix = f"message:{approval.tool_call.message_id}:{slack.CHANNEL}:"
        return list(Notification.objects.filter(channel=slack.CHANNEL, key__startswith=prefix))
    if event.name in EXPIRING:
        ids = payload.get("expired_tasks")
        if ids is None:  # an event recorded before its payload named them: every task of the requirement it expired
            tasks = ReviewTask.objects.filter(requirement_id=event.requirement_id, state=ReviewState.EXPIRED)
            ids = [str(pk) for pk in tasks.values_list("pk", flat=True)]
    else:
        ids = [str(payload.get("review_task"))]
    conversations = Conversation.objects.filter(requirement_id=event.requirement_id,  # indexed: the task's only
                                                outbox_event__payload__review_task__in=ids).values_list("pk", flat=True)
    keys = [f"conversation:{pk}:{slack.CHANNEL}" for pk in conversations]
    return list(Notification.objects.filter(channel=slack.CHANNEL, event=slack.STARTED, key__in=keys))


def _queue_update(event: OutboxEvent, post: Notification) -> int | None:
    row, new = Notification.objects.get_or_create(
        key=f"outbox:{event.pk}:{CHANNEL}:{post.pk}",
        defaults={"event": f"{post.event}_updated"[:40], "channel": CHANNEL, "recipient": post.recipient,
                  "requirement_id": post.requirement_id, "subject": post.subject,
                  "body": json.dumps({"post": post.pk}), "next_attempt_at": timezone.now()})
    return row.pk if new else None


def send(note: Notification) -> None:
    """Rewrite the post to show what it would show now; ChannelError to retry, ChannelRefused when retrying
    cannot help."""
    post = Notification.objects.filter(pk=json.loads(note.body).get("post"), channel=slack.CHANNEL).first()
    if post is None:
        raise ChannelRefused("the post's row is gone")
    if post.state == Notification.State.PENDING:
        raise ChannelError("the post is not made yet: it is updated once it is")
    posted = json.loads(post.body)
    ts = posted.get("ts")
    if post.state == Notification.State.FAILED or not ts:
        raise ChannelRefused(f"nothing to update: the post {post.pk} was not made, or its ts was not recorded")
    message = Message.objects.select_related("conversation").filter(pk=posted.get("message")).first()
    if message is None:
        raise ChannelRefused("the message is gone")
    team, channel = post.recipient.split(":")[:2]
    drawn = slack.shown(post, message)
    for _ in range(SENDS):
        _update(team, channel, ts, *drawn)
        # Another update of the post, drawn later, may have landed before this one: what Slack shows is what
        # this drew, so it is drawn again and sent again (chat.update is idempotent) until it is still current.
        now = slack.shown(post, message)
        if now == drawn:
            log.info("slack: post %s (%s) updated", post.pk, ts)
            return
        drawn = now
    raise ChannelError(f"the post {post.pk} changed while it was updated {SENDS} times: it is updated again later")


def _update(team: str, channel: str, ts: str, text: str, rows: list[Row]) -> None:
    slack.call_slack(team, lambda client: client.update_message(channel=channel, ts=ts, text=text, rows=rows))
