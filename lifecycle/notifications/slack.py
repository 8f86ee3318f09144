"""The `slack` channel: an assistant's answer or a system message in a conversation bound to a Slack thread,
posted into that thread (chat.postMessage), with approve/reject buttons for the action requests it made.

An outbox subscriber turns `MessageWritten` into one Notification row per Slack binding, keyed by the message and
the binding (relaying the event again adds none), in the relay's transaction; the row is then sent like any
notification (lifecycle/notifications/sending.py): claimed once, retried with backoff while Slack's failure is
transient (no answer, 429, 5xx, Slack's own trouble), failed for good when not (a token refused, a channel not
found). The row holds the message's id, never its text or a token: both are read when sending. The bot token
comes from the variable the workspace's row names, one of AITEAM_SLACK_TOKEN_ENVS that no other organization's
workspace names, and goes into the Authorization header only.
"""
from __future__ import annotations

import json
import logging
import os

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.delivery.api import HostError
from agents.delivery.errors import DeliveryError, NoAnswer
from agents.delivery.slack import Button, SlackClient, SlackSettings
from lifecycle.models import (
    ActionApproval,
    ConversationChannelBinding,
    Message,
    Notification,
    OutboxEvent,
    SlackWorkspace,
)
from lifecycle.models.conversations import Channel
from lifecycle.notifications.errors import ChannelError, ChannelRefused
from lifecycle.services import dispatch

log = logging.getLogger(__name__)
CHANNEL = "slack"


def queue_slack_post(event: OutboxEvent) -> None:
    """The outbox subscriber: a row per Slack thread the message's conversation is bound to, once per message."""
    message = Message.objects.select_related("conversation").filter(pk=(event.payload or {}).get("message")).first()
    if message is None or (message.author == Message.Author.PERSON and message.channel == Channel.SLACK):
        return  # a person's message from Slack is in its thread already
    threads = ConversationChannelBinding.objects.filter(conversation_id=message.conversation_id, channel=Channel.SLACK)
    created = []
    for binding in threads:
        row, new = Notification.objects.get_or_create(
            key=f"message:{message.pk}:{CHANNEL}:{binding.pk}",
            defaults={"event": f"conversation_{message.author}", "channel": CHANNEL, "recipient": binding.external_id,
                      "requirement_id": message.conversation.requirement_id,
                      "subject": message.conversation.title[:300], "body": json.dumps({"message": message.pk}),
                      "next_attempt_at": timezone.now()})
        if new:
            created.append(row.pk)
    if created:
        transaction.on_commit(lambda: _send_later(created))


def send(note: Notification) -> None:
    """Post the row's message into its thread; ChannelError to retry, ChannelRefused when retrying cannot help."""
    team, channel, thread_ts = (note.recipient.split(":") + ["", ""])[:3]
    message = Message.objects.filter(pk=json.loads(note.body).get("message")).first()
    if message is None:
        raise ChannelRefused("the message is gone")
    client_settings = _settings(team)
    try:
        with SlackClient(client_settings) as slack:
            answer = slack.post_message(channel=channel, thread_ts=thread_ts, text=_text(message),
                                        buttons=approval_buttons(message))
    except NoAnswer as exc:
        raise ChannelError(str(exc)) from None
    except HostError as exc:
        raise (ChannelError if exc.retryable else ChannelRefused)(str(exc)) from None
    except DeliveryError as exc:
        raise ChannelRefused(str(exc)) from None
    log.info("slack: message %s posted into %s as %s", message.pk, note.recipient, answer.get("ts"))


def _text(message: Message) -> str:
    """What the thread shows: a person's message written elsewhere names them; a failed answer says why."""
    if message.author == Message.Author.PERSON:
        who = getattr(message.user, "username", "") or "someone"
        return f"{who} (on the {message.channel}): {message.text}"
    if message.state == Message.State.FAILED:
        return f"The team could not answer: {message.error}"
    return message.text


def approval_buttons(message: Message) -> list[list[Button]]:
    """Approve and reject, for each action the answer asked for that still waits for a person."""
    pending = ActionApproval.objects.filter(tool_call__message=message, state=ActionApproval.State.PENDING)
    return [[Button(f"Approve: {a.summary}"[:75], f"approval:approve:{a.pk}", "primary"),
             Button("Reject", f"approval:reject:{a.pk}", "danger")] for a in pending.order_by("created_at")]


def _settings(team_id: str) -> SlackSettings:
    workspace = SlackWorkspace.objects.filter(team_id=team_id).first()
    if workspace is None:
        raise ChannelRefused(f"Slack workspace {team_id!r} is no organization's any more")
    env = workspace.bot_token_env
    if env not in settings.AITEAM_SLACK_TOKEN_ENVS:
        raise ChannelRefused(f"{env!r} is not one of the operator's AITEAM_SLACK_TOKEN_ENVS")
    if SlackWorkspace.objects.filter(bot_token_env=env).exclude(organization_id=workspace.organization_id).exists():
        raise ChannelRefused(f"{env!r} is named by another organization's Slack workspace too")
    if not (token := os.environ.get(env, "")):
        raise ChannelError(f"the worker has no value for {env}: the operator sets it")
    return SlackSettings(api_url=settings.AITEAM_SLACK_API_URL, token=token, timeout_s=settings.AITEAM_NOTIFY_TIMEOUT_S)


def _send_later(ids: list[int]) -> None:
    for pk in ids:
        try:
            dispatch.send_task(dispatch.SEND_NOTIFICATION, pk)
        except Exception:  # a broker that is down: the beat queues due rows again (notifications_requeue_due)
            log.exception("slack post %s not queued; the beat will", pk)
