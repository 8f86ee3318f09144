"""Conversations with the team's assistant (ADR 36): a person asks, a worker answers.

A question is a Message row, and its answer is a second row written `pending` in the same transaction, then
queued; the worker (lifecycle.services.answering) claims the pending row, routes the question through the
supervisor to one or two specialists and writes the answer into it.

Memory: every call reads the conversation's summary and the turns after it. When too many turns follow the
summary, the oldest are folded into it (a model call, stored on the conversation and shown as the summary), so
the history a call carries stays bounded however long the conversation runs.

What is written is kept as `recorded` keeps it (agents/llm/redact.py): a key pasted into a question, or repeated in
an answer, is masked in the rows as in the LLMCall records, and a NUL character is dropped.

Who sees a conversation: its participants (the person who started it, the people a system conversation is
addressed to, people who wrote in it). Everything else is 404, as for other organizations' rows.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F, Max, QuerySet
from django.utils import timezone

from agents.llm.redact import typed
from lifecycle.actors import Actor
from lifecycle.errors import DomainError, NotPermitted
from lifecycle.models import (
    Conversation,
    ConversationChannelBinding,
    ConversationParticipant,
    Membership,
    Message,
    Organization,
    OutboxEvent,
    Requirement,
)
from lifecycle.models.conversations import Channel
from lifecycle.services.dispatch import send_task
from lifecycle.services.outbox import emit

ANSWER_TASK = "lifecycle.tasks.answer_message"
TEXT_MAX_CHARS = 4000
TITLE_MAX_CHARS = 120


def visible_conversations(user: Any) -> QuerySet[Conversation]:
    """The conversations `user` takes part in, in organizations they are still a member of."""
    return Conversation.objects.filter(participants__user=user, organization__memberships__user=user)


def conversation_start(*, actor: Actor, organization: Organization, text: str, requirement: Requirement | None = None,
                       channel: str = Channel.WEB) -> tuple[Conversation, Message]:
    """A person starts a conversation with a question (about `requirement`, or about the organization's work);
    returns it and the pending answer."""
    text = _clean(text)
    if not Membership.objects.filter(user=actor.user, organization=organization).exists():
        raise NotPermitted(f"{actor.user} is not a member of {organization}")
    if requirement is not None and requirement.organization_id != organization.pk:
        raise DomainError("that requirement is not in this organization", "requirement")
    with transaction.atomic():
        conversation = Conversation.objects.create(organization=organization, requirement=requirement,
                                                   started_by=actor.user, title=_title(text))
        ConversationParticipant.objects.create(conversation=conversation, user=actor.user)
        answer = _ask(conversation, actor, text, channel)
    return conversation, answer


def message_post(*, conversation_id: Any, actor: Actor, text: str, channel: str = Channel.WEB) -> Message:
    """A person's next message in a conversation they can see; returns the pending answer."""
    text = _clean(text)
    with transaction.atomic():
        conversation = visible_conversations(actor.user).select_for_update(of=("self",)).get(pk=conversation_id)
        return _ask(conversation, actor, text, channel)


def system_conversation_start(*, requirement: Requirement, event: str, title: str, facts: str,
                              recipients: list[Any], outbox_event: OutboxEvent | None = None) -> Conversation:
    """The system speaks first: a conversation addressed to `recipients` about an event on `requirement`, opened
    with the event's facts (a system message) and the team's analysis of them (an answer, written by a worker as
    any other). The caller's transaction holds both. One per `outbox_event` (a unique column)."""
    conversation = Conversation.objects.create(organization_id=requirement.organization_id, requirement=requirement,
                                               title=title[:200], event=event, outbox_event=outbox_event)
    ConversationParticipant.objects.bulk_create(
        [ConversationParticipant(conversation=conversation, user=user) for user in {u.pk: u for u in recipients}.values()])
    facts_row = _append(conversation, author=Message.Author.SYSTEM, text=_clip(facts), channel=Channel.SYSTEM)
    answer = _append(conversation, author=Message.Author.ASSISTANT, text="", channel=Channel.SYSTEM,
                     state=Message.State.PENDING, in_reply_to=facts_row)
    transaction.on_commit(lambda: send_task(ANSWER_TASK, answer.pk), robust=True)
    return conversation


def system_note(conversation_id: Any, text: str) -> Message:
    """A line from the system in a conversation (an action approved, rejected or run)."""
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        message = _append(conversation, author=Message.Author.SYSTEM, text=_clip(text), channel=Channel.SYSTEM)
        message_written(message)
        return message


def message_written(message: Message) -> None:
    """An answer or a system line others should see where the conversation is bound too (a Slack thread): the
    outbox relays it to those channels. The caller's transaction holds it."""
    if ConversationChannelBinding.objects.filter(conversation_id=message.conversation_id).exists():
        emit(None, "MessageWritten", {"message": message.pk, "conversation": str(message.conversation_id)})


def mark_read(conversation: Conversation, user: Any) -> None:
    last = conversation.messages.aggregate(last=Max("seq"))["last"] or 0
    ConversationParticipant.objects.filter(conversation=conversation, user=user).update(last_read_seq=last)


def unread_count(user: Any) -> int:
    """Messages in the user's conversations after what they last read (the admin header's count)."""
    return unread_messages(user).count()


def unread_messages(user: Any) -> QuerySet[Message]:
    return Message.objects.filter(conversation__participants__user=user,
                                  seq__gt=F("conversation__participants__last_read_seq"),
                                  conversation__organization__memberships__user=user,
                                  state=Message.State.DONE).exclude(user=user)


def _ask(conversation: Conversation, actor: Actor, text: str, channel: str) -> Message:
    question = _append(conversation, author=Message.Author.PERSON, text=text, channel=channel, user=actor.user)
    ConversationParticipant.objects.get_or_create(conversation=conversation, user=actor.user)
    if channel != Channel.SLACK:  # a question asked on the web shows in the thread too; Slack's own are there
        message_written(question)
    answer = _append(conversation, author=Message.Author.ASSISTANT, text="", channel=channel,
                     state=Message.State.PENDING, in_reply_to=question)
    transaction.on_commit(lambda: send_task(ANSWER_TASK, answer.pk), robust=True)
    return answer


def _append(conversation: Conversation, *, author: str, text: str, channel: str, user: Any = None,
            state: str = Message.State.DONE, in_reply_to: Message | None = None) -> Message:
    """The next message; the caller holds the conversation's row lock or created it (seq is unique per
    conversation, so a writer without the lock fails rather than reuses a number)."""
    last = conversation.messages.aggregate(last=Max("seq"))["last"] or 0
    message = Message.objects.create(conversation=conversation, seq=last + 1, author=author, text=typed(text),
                                     user=user, channel=channel, state=state, in_reply_to=in_reply_to)
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
    return message


def _clean(text: str) -> str:
    text = typed((text or "").strip())  # before the title is taken from it
    if not text or len(text) > TEXT_MAX_CHARS:
        raise DomainError(f"write a message of 1 to {TEXT_MAX_CHARS} characters", "text")
    return text


def _clip(text: str) -> str:
    return text[:TEXT_MAX_CHARS]


def _title(text: str) -> str:
    first = text.splitlines()[0]
    return first if len(first) <= TITLE_MAX_CHARS else first[:TITLE_MAX_CHARS - 1] + "…"
