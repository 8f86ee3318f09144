"""The worker's side of a conversation (ADR 36): claim a pending answer, fold a long history, route the question
through the supervisor to its specialists (their tools built for the asker), write the answer or the reason it
failed. Every model call is an LLMCall row on the answer's message, counted against the organization's daily
assistant budget (AITEAM_ASSISTANT_DAILY_USD), never against a requirement's.

A lost task or a crashed worker leaves the row pending or answering; the beat queues it again
(`answers_requeue`), at most MAX_ATTEMPTS times, then it is failed with the reason.
"""
from __future__ import annotations

import logging
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from agents.llm.base import LLMError, LLMRequest, LLMResponse, Provider
from agents.llm.deadline import deadline_in
from agents.llm.factory import llm_from_settings, provider_from_settings
from agents.llm.redact import redact, typed
from agents.llm.replay import RecordingProvider
from agents.roles import assistant
from agents.schemas.conversation import AnswerContext, FoldContext, QuestionContext, Turn
from lifecycle.models import Conversation, LLMCall, Membership, Message
from lifecycle.services.assistant_tools import tools_for
from lifecycle.services.conversations import ANSWER_TASK, message_written
from lifecycle.services.dispatch import send_task
from lifecycle.services.llm_calls import llm_call_record

log = logging.getLogger(__name__)
FOLD_AT = 12  # turns after the summary before the oldest are folded
KEEP_TURNS = 6  # turns left unfolded after a fold
MAX_ATTEMPTS = 3


def stale_after() -> timedelta:
    """How long a claimed answer may go unwritten before it is taken as lost: past the task's hard time limit, so a
    slow answer still running is never claimed a second time."""
    return timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)


def answer_message(message_id: int) -> None:
    """The worker's side: claim the pending answer, write it (or the reason it failed)."""
    message = _claim(message_id)
    if message is None:
        return
    try:
        # a thread pool ignores Celery's time limits: the deadline caps the model calls, so an answer ends well
        # before stale_after and is never answered twice
        with deadline_in(settings.CELERY_TASK_SOFT_TIME_LIMIT):
            _answer(message)
    except LLMError as exc:
        if exc.transient and message.attempts < MAX_ATTEMPTS:
            _held(message).update(state=Message.State.PENDING, error=redact(str(exc))[:2000])
            send_task(ANSWER_TASK, message.pk)
            return
        _fail(message, f"the model could not answer: {redact(str(exc))}")
    except Exception as exc:
        log.exception("answering message %s failed", message.pk)
        _fail(message, f"internal error while answering: {type(exc).__name__}")


def answers_requeue() -> int:
    """The beat: queue again answers that were never picked up or whose worker was lost."""
    cutoff = timezone.now() - stale_after()
    stale = Message.objects.filter(author=Message.Author.ASSISTANT, state__in=(Message.State.PENDING,
                                                                                Message.State.ANSWERING))
    stale = stale.filter(created_at__lt=cutoff).exclude(claimed_at__gte=cutoff)
    given_up = list(stale.filter(attempts__gte=MAX_ATTEMPTS)[:500])
    for message in given_up:
        _fail(message, "no worker finished this answer after several attempts")
    ids = list(stale.filter(attempts__lt=MAX_ATTEMPTS).values_list("pk", flat=True)[:500])
    for pk in ids:
        send_task(ANSWER_TASK, pk)
    return len(ids) + len(given_up)


def spent_today(organization_id: Any) -> Decimal:
    since = timezone.now() - timedelta(days=1)
    total = LLMCall.objects.filter(message__conversation__organization_id=organization_id,
                                   created_at__gte=since).aggregate(total=Sum("cost_usd"))["total"]
    return total or Decimal(0)


def _claim(message_id: int) -> Message | None:
    with transaction.atomic():
        message = (Message.objects.select_for_update(skip_locked=True, of=("self",))
                   .select_related("conversation", "in_reply_to", "in_reply_to__user", "conversation__requirement")
                   .filter(pk=message_id, author=Message.Author.ASSISTANT).first())
        if message is None or message.state not in (Message.State.PENDING, Message.State.ANSWERING):
            return None
        if message.state == Message.State.ANSWERING and message.claimed_at and \
                message.claimed_at > timezone.now() - stale_after():
            return None  # another worker is on it
        message.state, message.claimed_at, message.attempts = Message.State.ANSWERING, timezone.now(), message.attempts + 1
        message.save(update_fields=["state", "claimed_at", "attempts"])
    return message


def _answer(message: Message) -> None:
    conversation = message.conversation
    asker = message.in_reply_to.user if message.in_reply_to is not None else None
    if asker is not None and (gone := _gone(asker, conversation.organization_id)):
        _fail(message, f"{asker} {gone}: the team does not answer them here")
        return
    llm = llm_from_settings(RecordingProvider(_Budgeted(provider_from_settings(), conversation.organization_id),
                                              lambda record: llm_call_record(record, requirement_id=None, step_id=None,
                                                                             message_id=message.pk)))
    _fold_if_long(conversation, before=message.seq, llm=llm)
    question = _question(conversation, message)
    route = assistant.route(question, llm)
    findings = {}
    for specialist in route.specialists:
        tools = tools_for(specialist, asker=asker, conversation=conversation, message=message)
        found, _ = assistant.investigate(specialist, question, tools, llm)
        findings[specialist] = found.findings
    answer = assistant.answer(AnswerContext(**question.model_dump(), findings=findings), llm)
    with transaction.atomic():
        updated = _held(message).update(  # the model's words, kept as any message's are (recorded)
            text=typed(answer.answer), state=Message.State.DONE, answered_at=timezone.now(), error="",
            route=typed({"specialists": list(route.specialists), "reason": route.reason, "findings": findings}))
        if updated:
            Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
            message_written(message)


def _gone(asker: Any, organization_id: Any) -> str:
    """Why a question asked before is no longer answered (its tools would act as the asker), or ""."""
    if not asker.is_active:
        return "was deactivated"
    if not Membership.objects.filter(user=asker, organization_id=organization_id).exists():
        return "is no longer a member of this organization"
    return ""


def _question(conversation: Conversation, message: Message) -> QuestionContext:
    turns = (conversation.messages.filter(seq__gt=conversation.summary_through, seq__lt=message.seq,
                                          state=Message.State.DONE)
             .exclude(pk=message.in_reply_to_id).order_by("seq"))
    asked = message.in_reply_to
    requirement = conversation.requirement
    about = ({"requirement": str(requirement.pk), "title": str(requirement), "state": requirement.state}
             if requirement is not None else {})
    text = asked.text if asked is not None else conversation.title
    if asked is not None and asked.author == Message.Author.SYSTEM:
        text = f"Explain this event to the people it concerns, with what they can do next: {asked.text}"
    return QuestionContext(question=text, summary=conversation.summary, about=about,
                           history=[Turn(author=m.author, text=m.text) for m in turns])


def _fold_if_long(conversation: Conversation, *, before: int, llm) -> None:
    turns = list(conversation.messages.filter(seq__gt=conversation.summary_through, seq__lt=before,
                                              state=Message.State.DONE).order_by("seq"))
    if len(turns) <= FOLD_AT:
        return
    oldest = turns[:len(turns) - KEEP_TURNS]
    summary = assistant.fold(FoldContext(summary=conversation.summary,
                                         turns=[Turn(author=m.author, text=m.text) for m in oldest]), llm)
    Conversation.objects.filter(pk=conversation.pk, summary_through=conversation.summary_through).update(
        summary=typed(summary.summary), summary_through=oldest[-1].seq)
    conversation.refresh_from_db(fields=["summary", "summary_through"])


def _fail(message: Message, error: str) -> None:
    """The answer failed for good: the reason is the answer, shown wherever the conversation is (a Slack thread
    too, so nobody waits there for an answer that will not come)."""
    with transaction.atomic():
        if Message.objects.filter(pk=message.pk, state__in=(Message.State.PENDING, Message.State.ANSWERING),
                                  attempts=message.attempts).update(state=Message.State.FAILED, error=error[:2000],
                                                                    answered_at=timezone.now()):
            message_written(message)


def _held(message: Message):
    """The row while this attempt still holds it: a later attempt's claim (a requeue) fences this one's writes."""
    return Message.objects.filter(pk=message.pk, state=Message.State.ANSWERING, attempts=message.attempts)


class _Budgeted:
    """The organization's assistant spend is capped per day (AITEAM_ASSISTANT_DAILY_USD): a call past the cap is
    refused before it is made."""

    def __init__(self, inner: Provider, organization_id: Any) -> None:
        self.inner, self.organization_id, self.name = inner, organization_id, inner.name

    def complete(self, request: LLMRequest) -> LLMResponse:
        cap = Decimal(str(settings.AITEAM_ASSISTANT_DAILY_USD))
        if spent_today(self.organization_id) >= cap:
            raise LLMError(f"the organization's assistant budget (US${cap} a day) is spent; it frees up as the "
                           "day's calls age out, or an operator raises AITEAM_ASSISTANT_DAILY_USD")
        return self.inner.complete(request)
