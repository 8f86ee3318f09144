"""The `slack` channel: an assistant's answer or a system message in a conversation bound to a Slack thread,
posted into that thread (chat.postMessage), with approve/reject buttons for the action requests it made.

An outbox subscriber turns `MessageWritten` into one Notification row per Slack binding, keyed by the message and
the binding (relaying the event again adds none), in the relay's transaction; the row is then sent like any
notification (lifecycle/notifications/sending.py): claimed once, retried with backoff while Slack's failure is
transient (no answer, 429, 5xx, Slack's own trouble), failed for good when not (a token refused, a channel not
found). The row holds the message's id, never its text or a token: both are read when sending, the text then
cleaned of control and format characters (lifecycle/notifications/messages.py). A person's Slack message the
conversation refused (SlackMessageRefused) gets one row, keyed by the message, replying in its thread with why:
that row holds the refusal's words (ours), never the message. The bot token comes from the variable the workspace's
row names, one of AITEAM_SLACK_TOKEN_ENVS that no other organization's workspace names, and goes into the
Authorization header only.

The system speaks first there too: a system conversation of a project naming a channel (`settings["slack_channel"]`,
in its organization's Slack workspace) gets one row, keyed by the conversation, that posts the event's facts as a
new message of that channel (with the review task's buttons when it waits for a decision) and binds the
conversation to the thread the message starts, once, with the ts Slack returned. The team's analysis and every later
message then go into that thread by the path above; replies there continue the conversation. Slack's
chat.postMessage has no idempotency key, so a post whose answer was lost may have been made: it is tried once more
at most (two posts at worst), a new message's and a thread post's alike, and a binding written by an earlier
attempt stops any further post of a new message.

Each post row records the ts Slack answered in its body (a new message's in the transaction that binds its thread),
so a decision made anywhere can rewrite the post (lifecycle/notifications/slack_updates.py), and a row whose ts is
recorded is not posted again (the worker stopped before recording it sent). Post and update show
the same thing (`shown`): the text, then per action request (or the review task) its buttons while it waits (a
request's with the texts approving would record as the presser's words, quoted), else one line saying what was
decided, by whom, how and when.
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from datetime import UTC
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from agents.delivery.api import HostError
from agents.delivery.errors import DeliveryError, NoAnswer
from agents.delivery.slack import LINE_MAX_CHARS, Button, Row, SlackClient, SlackSettings
from lifecycle.models import (
    ActionApproval,
    Conversation,
    ConversationChannelBinding,
    Message,
    Notification,
    OutboxEvent,
    ReviewTask,
    SlackWorkspace,
)
from lifecycle.models.conversations import Channel
from lifecycle.notifications.errors import ChannelError, ChannelRefused
from lifecycle.notifications.messages import quoted, untrusted_line, untrusted_text
from lifecycle.services import dispatch
from lifecycle.services.slack import thread_key
from lifecycle.services.story_edits import stories_version
from lifecycle.states import ReviewKind

log = logging.getLogger(__name__)
CHANNEL = "slack"
STARTED = "conversation_started"  # the row that posts a system conversation's facts as a new channel message
REFUSED = "message_refused"  # the row that tells a thread why a person's message in it was not taken
REASON_MAX_CHARS = 500
REVIEW_BUTTONS = {"approve": "primary", "reject": "danger"}  # of a waiting task's options, the ones a press decides
APPROVE = "Approve: "
LABEL_MAX_CHARS = 75  # a button's text
LOST_ANSWERS_RETRIED = 1  # a post whose answer was lost is posted again this often at most


def queue_slack_post(event: OutboxEvent) -> None:
    """The outbox subscriber: a row per Slack thread the message's conversation is bound to, once per message."""
    message = Message.objects.select_related("conversation").filter(pk=(event.payload or {}).get("message")).first()
    if message is None or not _from_elsewhere(message):
        return
    threads = ConversationChannelBinding.objects.filter(conversation_id=message.conversation_id, channel=Channel.SLACK)
    created = [pk for binding in threads if (pk := _queue_into(message, binding))]
    if created:
        transaction.on_commit(lambda: send_later(created))


def queue_slack_start(conversation: Conversation) -> None:
    """A system conversation of a project naming a Slack channel: one row (per conversation) posting its facts
    there as a new message. In the caller's transaction, which opened the conversation."""
    project_settings = conversation.requirement.project.settings if conversation.requirement_id else {}
    channel = (project_settings or {}).get("slack_channel")
    if not channel:
        return
    workspaces = list(SlackWorkspace.objects.filter(organization_id=conversation.organization_id)[:2])
    if len(workspaces) != 1:
        log.warning("conversation %s: not posted to Slack channel %s, the organization has %s Slack workspaces",
                    conversation.pk, channel, len(workspaces) or "no")
        return
    facts = conversation.messages.order_by("seq").first()
    row, new = Notification.objects.get_or_create(
        key=f"conversation:{conversation.pk}:{CHANNEL}",
        defaults={"event": STARTED, "channel": CHANNEL, "recipient": f"{workspaces[0].team_id}:{channel}",
                  "requirement_id": conversation.requirement_id, "subject": conversation.title[:300],
                  "body": json.dumps({"message": facts.pk, "lost": 0}), "next_attempt_at": timezone.now()})
    if new:
        transaction.on_commit(lambda: send_later([row.pk]))


def queue_slack_refusal(event: OutboxEvent) -> None:
    """The outbox subscriber of SlackMessageRefused: one row per refused Slack message, replying in its thread with
    why (the reason is ours: the conversation's refusal)."""
    payload = event.payload or {}
    thread, ts = str(payload.get("thread") or ""), str(payload.get("ts") or "")
    if not (thread and ts):
        return
    row, new = Notification.objects.get_or_create(
        key=f"refusal:{thread}:{ts}:{CHANNEL}",
        defaults={"event": REFUSED, "channel": CHANNEL, "recipient": thread, "subject": "a message not taken",
                  "body": json.dumps({"refused": str(payload.get("reason") or "")[:REASON_MAX_CHARS]}),
                  "next_attempt_at": timezone.now()})
    if new:
        transaction.on_commit(lambda: send_later([row.pk]))


def slack_channel_problems(project_settings: dict[str, Any], organization_id: Any) -> list[str]:
    """What the project form refuses of `settings["slack_channel"]` beyond its form (repo_settings): the channel is
    looked up in the organization's one Slack workspace."""
    if not project_settings.get("slack_channel"):
        return []
    count = SlackWorkspace.objects.filter(organization_id=organization_id).count()
    if count == 1:
        return []
    return [f"slack_channel: the organization has {count or 'no'} Slack workspaces; system conversations are posted "
            "to a channel of its one workspace (the operator adds it)"]


def send(note: Notification) -> None:
    """Post the row's message into its thread, or as the new message that starts one; ChannelError to retry,
    ChannelRefused when retrying cannot help."""
    team, channel, thread_ts = (note.recipient.split(":") + ["", ""])[:3]
    if note.event == REFUSED:
        refused = untrusted_line(json.loads(note.body).get("refused") or "")
        _post_in_thread(note, team, channel, thread_ts, f"Your message was not taken: {refused}", [])
        return
    message = Message.objects.select_related("conversation").filter(pk=json.loads(note.body).get("message")).first()
    if message is None:
        raise ChannelRefused("the message is gone")
    if note.event == STARTED:
        _start_thread(note, message, team, channel)
        return
    _post_in_thread(note, team, channel, thread_ts, *shown(note, message))


def _post_in_thread(note: Notification, team: str, channel: str, thread_ts: str, text: str, rows: list[Row]) -> None:
    """Post into the thread, once: not again once its ts is recorded, once more at most when Slack's answer was
    lost."""
    if json.loads(note.body).get("ts"):
        return  # posted; only the row's outcome was not recorded (a retry would post it twice)
    try:
        answer = call_slack(team, lambda slack: slack.post_message(channel=channel, thread_ts=thread_ts, text=text,
                                                                   rows=rows))
    except AnswerLost as exc:
        raise _lost_again(note, exc) from None
    if isinstance(answer.get("ts"), str):  # what an update names; the row's claim token guards it as _record does
        Notification.objects.filter(pk=note.pk, attempts=note.attempts).update(
            body=json.dumps({**json.loads(note.body), "ts": answer["ts"]}))
    log.info("slack: notification %s posted into %s as %s", note.pk, note.recipient, answer.get("ts"))


def shown(note: Notification, message: Message) -> tuple[str, list[Row]]:
    """What the row's post shows now, when posted and when updated: the text, then the buttons of what still waits
    for a person and a line for each thing decided."""
    if note.event == STARTED:
        text = f"{untrusted_line(message.conversation.title)}\n{untrusted_text(message.text)}"
        return text, review_rows(message.conversation)
    return _text(message), approval_rows(message)


def _start_thread(note: Notification, facts: Message, team: str, channel: str) -> None:
    """Post the facts as a new message and bind the conversation to its thread, unless an earlier attempt did."""
    if ConversationChannelBinding.objects.filter(conversation_id=facts.conversation_id, channel=Channel.SLACK,
                                                 external_id__startswith=f"{team}:{channel}:").exists():
        return  # posted and bound; only the row's outcome was not recorded
    text, rows = shown(note, facts)
    try:
        answer = call_slack(team, lambda slack: slack.post_message(channel=channel, text=text, rows=rows))
    except AnswerLost as exc:
        raise _lost_again(note, exc) from None
    if not isinstance(answer.get("ts"), str) or not answer["ts"]:
        raise ChannelRefused("Slack posted the message but named no ts: no thread to bind")
    try:
        _bind(note, facts, answer["ts"])
    except DatabaseError as exc:  # posted: a retry would post it again
        raise ChannelRefused(f"posted as {answer['ts']} but not bound to its thread: {type(exc).__name__}") from None
    log.info("slack: conversation %s started thread %s:%s:%s", facts.conversation_id, team, channel, answer["ts"])


def _lost_again(note: Notification, exc: Exception) -> ChannelError:
    """A lost answer may hide a post that was made: one more try at most, so two posts at worst."""
    body = json.loads(note.body)
    if body.get("lost", 0) >= LOST_ANSWERS_RETRIED:
        return ChannelRefused(f"{exc}; Slack's answer was lost again, the message may be in the channel already")
    Notification.objects.filter(pk=note.pk, attempts=note.attempts).update(
        body=json.dumps({**body, "lost": body.get("lost", 0) + 1}))
    return ChannelError(str(exc))


def _bind(note: Notification, facts: Message, ts: str) -> None:
    """The binding, the post's ts in its row, and a row for each message written before it (the analysis may be
    done already). Its later messages are locked, then the conversation (the order of the answer's writer, which
    updates both; a person's message or a system line locks the conversation to be added): a writer either sees
    the binding (and queues its own row) or is seen here."""
    team, channel = note.recipient.split(":")[:2]
    with transaction.atomic():
        list(Message.objects.select_for_update().filter(conversation_id=facts.conversation_id, seq__gt=facts.seq))
        conversation = Conversation.objects.select_for_update().get(pk=facts.conversation_id)
        binding = ConversationChannelBinding.objects.create(conversation=conversation, channel=Channel.SLACK,
                                                            external_id=thread_key(team, channel, ts))
        Notification.objects.filter(pk=note.pk).update(body=json.dumps({**json.loads(note.body), "ts": ts}))
        written = conversation.messages.filter(seq__gt=facts.seq, state__in=(Message.State.DONE, Message.State.FAILED))
        created = [pk for m in written.order_by("seq") if _from_elsewhere(m) and (pk := _queue_into(m, binding))]
        if created:
            transaction.on_commit(lambda: send_later(created))


def _queue_into(message: Message, binding: ConversationChannelBinding) -> int | None:
    """The row posting `message` into the binding's thread: its id when new, None when queued already."""
    row, new = Notification.objects.get_or_create(
        key=f"message:{message.pk}:{CHANNEL}:{binding.pk}",
        defaults={"event": f"conversation_{message.author}", "channel": CHANNEL, "recipient": binding.external_id,
                  "requirement_id": message.conversation.requirement_id,
                  "subject": message.conversation.title[:300], "body": json.dumps({"message": message.pk}),
                  "next_attempt_at": timezone.now()})
    return row.pk if new else None


def _from_elsewhere(message: Message) -> bool:
    """Not a person's message from Slack: those are in their thread already."""
    return not (message.author == Message.Author.PERSON and message.channel == Channel.SLACK)


class AnswerLost(ChannelError):
    """The request went out and no answer came back: the message may have been posted."""


def call_slack(team: str, call: Callable[[SlackClient], dict[str, Any]]) -> dict[str, Any]:
    """A call of the workspace's client with its token; Slack's refusals as the channel's errors."""
    client_settings = _settings(team)
    try:
        with SlackClient(client_settings) as slack:
            return call(slack)
    except NoAnswer as exc:
        raise AnswerLost(str(exc)) from None
    except HostError as exc:
        if exc.retryable:
            raise ChannelError(str(exc), retry_after_s=exc.retry_after_s) from None
        raise ChannelRefused(str(exc)) from None
    except DeliveryError as exc:
        raise ChannelRefused(str(exc)) from None


def _text(message: Message) -> str:
    """What the thread shows: a person's message written elsewhere names them; a failed answer says why."""
    if message.author == Message.Author.PERSON:
        who = getattr(message.user, "username", "") or "someone"
        return f"{who} (on the {message.channel}): {untrusted_text(message.text)}"
    if message.state == Message.State.FAILED:
        return f"The team could not answer: {untrusted_text(message.error)}"
    return untrusted_text(message.text)


def approval_rows(message: Message) -> list[Row]:
    """For each action the answer asked for: while it waits for a person, what approving records as their words
    (the assistant's texts, quoted) and approve and reject; else what came of it (its summary cut as its button
    showed it: nothing more of the model's words than the post had)."""
    rows: list[Row] = []
    for a in ActionApproval.objects.filter(tool_call__message=message).select_related("decided_by").order_by(
            "created_at"):
        label = f"{APPROVE}{untrusted_line(a.summary)}"[:LABEL_MAX_CHARS]
        if a.state == ActionApproval.State.PENDING:
            rows += [_proposed(a)] if a.proposed else []
            rows.append([Button(label, f"approval:approve:{a.pk}", "primary"),
                         Button("Reject", f"approval:reject:{a.pk}", "danger")])
        elif a.state == ActionApproval.State.SUPERSEDED:  # result: our words, a task's decider's name at most
            rows.append(f"{label[len(APPROVE):]}: no longer asked, {untrusted_line(a.result)}")
        else:
            by = _by(a.decided_by, a.decided_via, a.decided_at)
            rows.append(f"{label[len(APPROVE):]}: {APPROVAL_OUTCOMES.get(a.state, a.state)} {by}")
    return rows


def _proposed(approval: ActionApproval) -> str:
    """The texts approving would record as the presser's own, each quoted line by line: shown literally, so none
    of it can pass for our words; cut to a context line, saying so."""
    line = "Approving records these as your own words; the assistant wrote them:\n" + "\n".join(
        f"{name}:\n{quoted(text)}" for name, text in approval.proposed.items())
    return line if len(line) <= LINE_MAX_CHARS else line[:LINE_MAX_CHARS - 30] + "… (the rest is on the web)"


APPROVAL_OUTCOMES = {ActionApproval.State.REJECTED: "rejected", ActionApproval.State.DONE: "approved and done",
                     ActionApproval.State.FAILED: "approved, but it could not be done (the conversation says why)"}


def review_rows(conversation: Conversation) -> list[Row]:
    """Approve and reject (those of them the task offers) for the review task a system conversation is about,
    while it waits for a decision (a press decides it as the mapped Slack user: lifecycle/services/slack.py);
    once it does not, the decision or its expiry."""
    event = conversation.outbox_event
    task_id = (event.payload or {}).get("review_task") if event is not None else None
    task = ReviewTask.objects.select_related("decided_by").filter(
        pk=task_id, organization_id=conversation.organization_id).first() if task_id else None
    if task is None:
        return []
    if not task.is_pending:
        decided = task.decision and f"Decided: {task.get_decision_display()} " + _by(
            task.decided_by or task.decided_by_policy, task.decided_via, task.decided_at)
        return [decided or f"No longer waits for a decision: {task.state}"]
    named = untrusted_line(str(task))
    # a stories approval's buttons carry the version of the stories as they are when posted: a press after an edit
    # is refused (ADR 45), so a button never approves text changed since it was offered
    version = f":{stories_version(task)}" if task.kind == ReviewKind.STORIES_APPROVAL else ""
    row = [Button(f"{decision.capitalize()}: {named}"[:LABEL_MAX_CHARS] if decision == "approve"
                  else decision.capitalize(), f"review:{decision}:{task.pk}{version}", style)
           for decision, style in REVIEW_BUTTONS.items() if decision in task.options]
    return [row] if row else []


def _by(who: Any, via: str, at: Any) -> str:
    """"by rita via slack at 2025-05-01 10:02 UTC": an account's name, never words a person or a model wrote."""
    name = untrusted_line(getattr(who, "username", who) or "") or "someone"
    when = f" at {at.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if at else ""
    return f"by {name}" + (f" via {via}" if via else "") + when


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


def send_later(ids: list[int]) -> None:
    for pk in ids:
        try:
            dispatch.send_task(dispatch.SEND_NOTIFICATION, pk)
        except Exception:  # a broker that is down: the beat queues due rows again (notifications_requeue_due)
            log.exception("slack post %s not queued; the beat will", pk)
