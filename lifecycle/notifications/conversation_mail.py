"""Conversations by e-mail (issue 24): an e-mail per system conversation to the people who want one at once, and
a daily digest of unread conversation messages for those who chose it (ConversationEmail; no row: at once).

Both are Notification rows sent by the ordinary sending (retried with backoff, the beat's requeue), keyed so that
doing the work twice sends once: the conversation and the address, or the person and the day.
"""
from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.db.models.functions import Coalesce
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from lifecycle.models import Conversation, ConversationEmail, Notification
from lifecycle.notifications.messages import quoted, render_text, requirement_title, untrusted_line
from lifecycle.notifications.sending import enqueue
from lifecycle.services.conversations import unread_messages

Delivery = ConversationEmail.Delivery
DIGEST_CONVERSATIONS_MAX = 20
DIGEST_LATEST_SHOWN = 3


def conversation_mail_queue(conversation: Conversation) -> list[Notification]:
    """Inside the transaction that started `conversation`: one e-mail to each participant who wants one at once."""
    users = [p.user for p in conversation.participants.select_related("user", "user__conversation_email")]
    wanted = [u for u in users if u.email and _delivery(u) == Delivery.IMMEDIATELY]
    facts = conversation.messages.filter(seq=1).values_list("text", flat=True).first() or ""
    requirement = conversation.requirement
    subject, body = render_text("conversation_started", {
        "conversation_title": untrusted_line(conversation.title), "requirement": requirement,
        "title": requirement_title(requirement) if requirement else "", "facts": quoted(facts),
        "url": conversation_url(conversation), "settings_url": _settings_url()})
    return [row for user in wanted if (row := _queue_email(
        key=f"conversation:{conversation.pk}", kind="conversation_started", recipient=user.email,
        subject=subject, body=body, requirement_id=conversation.requirement_id)) is not None]


def conversation_digests_queue(*, now: datetime | None = None, limit: int = 500) -> int:
    """The beat, daily: each digest reader's unread messages written since their last digest, in one e-mail.
    Rows are claimed with SKIP LOCKED, so two beats at once send each digest once."""
    now = now or timezone.now()
    queued = 0
    with transaction.atomic():
        readers = (ConversationEmail.objects.select_for_update(skip_locked=True, of=("self",)).select_related("user")
                   .filter(delivery=Delivery.DAILY_DIGEST, user__is_active=True).exclude(user__email="")
                   .order_by("pk")[:limit])
        for reader in readers:
            queued += _digest(reader, now)
    return queued


def _digest(reader: ConversationEmail, now: datetime) -> int:
    unread = unread_messages(reader.user).annotate(written=Coalesce("answered_at", "created_at")).filter(written__lte=now)
    if reader.digest_through is not None:  # the first digest holds everything unread
        unread = unread.filter(written__gt=reader.digest_through)
    counts = list(unread.values("conversation").annotate(n=Count("pk")).order_by("-n")[:DIGEST_CONVERSATIONS_MAX])
    if not counts:
        return 0
    conversations = Conversation.objects.in_bulk([c["conversation"] for c in counts])
    items = [{"title": untrusted_line(conversations[c["conversation"]].title), "count": c["n"],
              "url": conversation_url(conversations[c["conversation"]]),
              "latest": _latest(unread.filter(conversation_id=c["conversation"]))} for c in counts]
    subject, body = render_text("conversation_digest", {"items": items, "total": sum(c["n"] for c in counts),
                                                        "settings_url": _settings_url()})
    row = _queue_email(key=f"conversation-digest:{reader.user_id}:{now.date().isoformat()}", kind="conversation_digest",
                       recipient=reader.user.email, subject=subject, body=body, requirement_id=None)
    if row is None:
        return 0  # today's digest went out already: what came since waits for tomorrow's
    ConversationEmail.objects.filter(pk=reader.pk).update(digest_through=now)
    return 1


def _latest(unread: Any) -> list[dict[str, str]]:
    """The last unread messages, oldest first, each on one line of the digest."""
    latest = list(unread.order_by("-seq")[:DIGEST_LATEST_SHOWN])[::-1]
    return [{"author": message.author, "text": untrusted_line(message.text)} for message in latest]


def _queue_email(*, key: str, kind: str, recipient: str, subject: str, body: str,
                 requirement_id: Any) -> Notification | None:
    """A new e-mail row, sent after commit; None when e-mail is off or the row exists (the work ran twice)."""
    if "email" not in settings.AITEAM_NOTIFY_CHANNELS:
        return None
    row, new = Notification.objects.get_or_create(
        key=f"{key}:email:{hashlib.sha256(recipient.encode()).hexdigest()[:24]}",
        defaults={"event": kind, "channel": "email", "recipient": recipient, "requirement_id": requirement_id,
                  "subject": subject, "body": body, "next_attempt_at": timezone.now()})
    if not new:
        return None
    transaction.on_commit(lambda: enqueue([row.pk]))
    return row


def _delivery(user: Any) -> str:
    try:
        return user.conversation_email.delivery
    except ConversationEmail.DoesNotExist:
        return Delivery.IMMEDIATELY


def conversation_url(conversation: Conversation) -> str:
    """The conversation's page in the admin; the requirement's page until the conversation admin exists."""
    try:
        return settings.AITEAM_PUBLIC_URL + reverse("admin:lifecycle_conversation_change", args=[conversation.pk])
    except NoReverseMatch:
        target = conversation.requirement_id
        return settings.AITEAM_PUBLIC_URL + (reverse("admin:lifecycle_requirement_change", args=[target]) if target
                                             else reverse("admin:index"))


def _settings_url() -> str:
    return settings.AITEAM_PUBLIC_URL + reverse("admin:lifecycle_conversationemail_changelist")

