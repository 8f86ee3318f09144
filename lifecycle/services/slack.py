"""Slack, inbound (issue 24): a message in a Slack thread bound to a conversation is a person's message in it; a
mention of the bot (or a direct message) outside one starts a conversation and binds its thread; a button press
decides an approval request or a review task. Always as the aiteam user the Slack user is mapped to
(SlackIdentity), with that user's permissions: nothing in Slack's text grants anything. An unmapped Slack user, or
a message in a thread no conversation is bound to, is ignored (logged by the caller). A message the conversation
refuses (too long, say) is answered in its thread with why (the SlackMessageRefused event: its subscriber queues
the post, lifecycle/notifications/slack.py), once: the message is taken in as seen.

Repeats: Slack retries an event it got no quick answer to, and reports a mention twice (app_mention and message).
Each Slack message (channel, ts) is taken in once: its SlackMessageSeen row is written in the transaction that
writes the conversation's message, so a repeat finds it and does nothing. Two people starting a conversation in
the same thread at once are not a repeat: the second finds the first's binding when it writes its own, and its
message goes into the conversation that binding names.
"""
from __future__ import annotations

import re
import uuid
from typing import Any

from django.db import IntegrityError, transaction

from lifecycle.actors import Actor
from lifecycle.errors import DomainError, NotPermitted, echoed
from lifecycle.models import (
    ActionApproval,
    ConversationChannelBinding,
    ConversationParticipant,
    Membership,
    ReviewTask,
    SlackIdentity,
    SlackMessageSeen,
    SlackWorkspace,
)
from lifecycle.models.conversations import Channel
from lifecycle.services.approvals import approval_decide
from lifecycle.services.conversations import conversation_start, message_post
from lifecycle.services.decisions import review_decide
from lifecycle.services.outbox import emit

VIA = "slack"
_MENTION = re.compile(r"<@[A-Z0-9]+>")
REFUSED = "SlackMessageRefused"  # the outbox event that has the thread told why a message was not taken
STARTS = "app_mention"  # and a direct message (channel_type "im"): the ways to start a conversation from Slack
# subtypes that are still a person's new message: a thread reply also sent to the channel, a message with a file
PERSONS_SUBTYPES = ("", "thread_broadcast", "file_share")
# Slack's channel ids and timestamps ("C0123ABCD", "1700000000.000200") are short; what SlackMessageSeen holds of them
ID_MAX_CHARS = min(SlackMessageSeen._meta.get_field(name).max_length for name in ("channel", "ts"))


def thread_key(team_id: str, channel: str, thread_ts: str) -> str:
    """A Slack thread as ConversationChannelBinding.external_id names it."""
    return f"{team_id}:{channel}:{thread_ts}"


def slack_user(workspace: SlackWorkspace, slack_user_id: str) -> Any:
    """The aiteam user a Slack user of the workspace is, while a member of its organization; else None."""
    identity = SlackIdentity.objects.select_related("user").filter(workspace=workspace,
                                                                   slack_user_id=slack_user_id).first()
    if identity is None or not identity.user.is_active:
        return None
    member = Membership.objects.filter(user=identity.user, organization_id=workspace.organization_id).exists()
    return identity.user if member else None


def slack_message_take(*, workspace: SlackWorkspace, event: dict[str, Any], event_id: str = "") -> str:
    """A message event (or app_mention): what became of it ("posted", "started", "repeat", "ignored: <why>", or
    "refused: <why>" when the conversation refused it: the thread is told)."""
    if str(event.get("subtype") or "") not in PERSONS_SUBTYPES or event.get("bot_id"):
        return "ignored: an edit, a join or a bot's message (ours included) is not a person's message"
    user_id, channel, ts = (str(event.get(k) or "") for k in ("user", "channel", "ts"))
    if not (user_id and channel and ts):
        return "ignored: no user, channel or ts"
    thread_ts = str(event.get("thread_ts") or ts)
    if max(len(channel), len(ts), len(thread_ts)) > ID_MAX_CHARS:  # not Slack's: it would not fit the rows below
        return f"ignored: a channel, ts or thread_ts longer than {ID_MAX_CHARS} characters is not Slack's"
    user = slack_user(workspace, user_id)
    if user is None:
        return f"ignored: Slack user {echoed(user_id)} is not mapped to a member of the organization"
    text = _MENTION.sub("", str(event.get("text") or "")).strip()
    key = thread_key(workspace.team_id, channel, thread_ts)
    try:
        with transaction.atomic():
            seen = SlackMessageSeen.objects.create(workspace=workspace, channel=channel, ts=ts, event_id=event_id[:40])
            try:
                with transaction.atomic():  # a refusal undoes what was written for the message (a participant)
                    outcome, message = _take(workspace, user, key, text, starts=_starts(event))
            except (DomainError, NotPermitted) as exc:  # seen: a retry of it is a repeat, told once
                emit(None, REFUSED, {"thread": key, "ts": ts, "reason": str(exc)})
                return f"refused: {exc}"
            if message is None:
                transaction.set_rollback(True)  # nothing taken in: a repeat of it is looked at again
            else:
                SlackMessageSeen.objects.filter(pk=seen.pk).update(message=message)
    except IntegrityError:
        return "repeat"
    return outcome


def slack_action_take(*, workspace: SlackWorkspace, slack_user_id: str, value: str) -> str:
    """A button press ("approval:approve:<id>", "approval:reject:<id>", "review:<decision>:<task id>", with
    ":<stories version>" on a stories approval's), done as the mapped user; NotPermitted for an unmapped one, the
    services' own errors otherwise (StoriesChanged: the stories were edited after the button was posted)."""
    user = slack_user(workspace, slack_user_id)
    if user is None:
        raise NotPermitted(f"Slack user {echoed(slack_user_id)} is not mapped to a member of the organization")
    kind, decision, target, version = (value.split(":", 3) + ["", "", ""])[:4]
    actor = Actor.human(user, VIA)
    if kind == "approval" and decision in ("approve", "reject"):
        if not ActionApproval.objects.filter(pk=_uuid(target), organization_id=workspace.organization_id).exists():
            raise ActionApproval.DoesNotExist(f"no action request {echoed(target)} in this organization")
        approval = approval_decide(approval_id=target, actor=actor, approve=decision == "approve",
                                   reason="" if decision == "approve" else f"rejected in Slack by {user.username}")
        return f"action {approval.state}"
    if kind == "review":
        if not ReviewTask.objects.filter(pk=_uuid(target), organization_id=workspace.organization_id).exists():
            raise ReviewTask.DoesNotExist(f"no review task {echoed(target)} in this organization")
        task = review_decide(task_id=target, actor=actor, decision=decision,
                             reason=f"decided in Slack by {user.username}", stories_version=version or None)
        return f"review task decided: {task.decision}"
    raise DomainError(f"not a button of aiteam's: {value[:80]!r}", "value")


def _take(workspace: SlackWorkspace, user: Any, key: str, text: str, *, starts: bool) -> tuple[str, Any]:
    binding = thread_binding(key)
    if binding is None and not starts:
        return "ignored: not in a thread bound to a conversation (mention the bot to start one)", None
    if not text:
        return "ignored: no text", None
    actor = Actor.human(user, VIA)
    if binding is None:
        try:
            with transaction.atomic():
                conversation, answer = conversation_start(actor=actor, organization=workspace.organization, text=text,
                                                          channel=Channel.SLACK)
                ConversationChannelBinding.objects.create(conversation=conversation, channel=Channel.SLACK,
                                                          external_id=key)
            return "started", answer.in_reply_to
        except IntegrityError:  # someone else started one in this thread at the same moment: this message is its next
            binding = thread_binding(key)
            if binding is None:
                raise
    if binding.conversation.organization_id != workspace.organization_id:
        return "ignored: the thread's conversation is another organization's", None
    # whoever may write in the Slack thread reads it there already: they take part in the conversation
    ConversationParticipant.objects.get_or_create(conversation=binding.conversation, user=user)
    answer = message_post(conversation_id=binding.conversation_id, actor=actor, text=text, channel=Channel.SLACK)
    return "posted", answer.in_reply_to


def thread_binding(key: str) -> ConversationChannelBinding | None:
    return (ConversationChannelBinding.objects.select_related("conversation")
            .filter(channel=Channel.SLACK, external_id=key).first())


def _starts(event: dict[str, Any]) -> bool:
    return event.get("type") == STARTS or event.get("channel_type") == "im"


def _uuid(value: str) -> str | None:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None
