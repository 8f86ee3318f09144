"""Someone's text in a notification (a brief, a ticket's title, a review question, a model's answer) arrives without
control or format characters, cannot start a line of its own or pass for the message's link, and never stops the
notification from being sent: an e-mail subject with a line break is one Django refuses for good."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core import mail
from django.core.mail import BadHeaderError, EmailMessage
from django.db import transaction
from django.utils import timezone

from lifecycle.models import ConversationEmail, Notification, Requirement
from lifecycle.notifications.conversation_mail import conversation_digests_queue
from lifecycle.notifications.messages import quoted, untrusted_line, untrusted_text
from lifecycle.services.outbox import emit
from tests.conversations import script_answer
from tests.fakes.webhook_server import WebhookServer
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)
# a bidi override, a zero-width space, an ANSI escape, and a line break before a link of the writer's own
TITLE = "Reading\u202e\u200b list\x1b[2J\r\nOpen it: http://evil.example/login"
SHOWN = "Reading list [2J Open it: http://evil.example/login"
HIDDEN = ("\u202e", "\u200b", "\x1b", "\r")


def test_one_line_loses_every_control_and_format_character_and_several_keep_their_line_breaks():
    assert untrusted_line(TITLE) == SHOWN
    text = "first\u2028second\r\n\r\n  indented\tthird\x85\u200bfourth \n"
    assert untrusted_text(text) == "first\nsecond\n\n  indented third\nfourth"
    assert quoted(text) == "> first\n> second\n>\n>   indented third\n> fourth"


def test_django_refuses_a_subject_with_a_line_break_so_none_reaches_it():
    with pytest.raises(BadHeaderError):
        EmailMessage(subject=TITLE, body="", to=["rita@acme.test"]).message()


def test_a_review_tasks_title_and_question_reach_mail_and_webhook_cleaned_and_are_sent(acme_project, rita, settings):
    rita.email = "rita@acme.test"
    rita.save()
    with WebhookServer() as endpoint:
        settings.AITEAM_NOTIFY_WEBHOOK_URL = endpoint.url  # the operator's: loopback is allowed
        task = open_review(acme_project, title=TITLE)  # its question: f"Decide {TITLE}?"

    [message] = mail.outbox
    assert message.subject == f"New review task: Stories Approval for {SHOWN}"
    body = message.body
    assert f"\nRequirement: {SHOWN} (" in body
    assert "\nQuestion:\n> Decide Reading list [2J\n> Open it: http://evil.example/login?\n" in body
    url = f"{settings.AITEAM_PUBLIC_URL}/admin/lifecycle/reviewtask/{task.pk}/change/"
    assert body.endswith(f"\nOpen the task in the admin: {url}\n")
    assert all(line.startswith(("Requirement: ", "> ")) for line in body.splitlines() if "evil" in line)
    [request] = endpoint.requests
    text = json.loads(request["body"])["text"]
    assert text.startswith(f"*New review task: Stories Approval for {SHOWN}*\n")
    assert "\n&gt; Open it: http://evil.example/login?\n" in text and f"\nOpen the task in the admin: {url}" in text
    assert not any(char in part for char in HIDDEN for part in (message.subject, body, text))
    assert sorted(Notification.objects.values_list("channel", "state")) == [("email", "sent"), ("webhook", "sent")]


def test_a_system_conversations_mail_and_digest_show_its_text_cleaned(scripted, acme_project, alice, rita):
    """The conversation's title holds the requirement's; the analysis is the model's: one line each in a digest."""
    for user in (alice, rita):
        user.email = f"{user.username}@acme.test"
        user.save()
    ConversationEmail.objects.create(user=rita, delivery="daily_digest")
    acme_project.settings = {"watchers": ["rita"]}
    acme_project.save()
    script_answer(scripted, specialists={"status_reporter": []},
                  answer="Merged.\u200b\nOpen it: http://evil.example/merge\x1b[0m")
    requirement = Requirement.objects.create(organization=acme_project.organization, project=acme_project,
                                             brief="b", title=TITLE, state="in_development", submitted_by=alice)
    with transaction.atomic():
        emit(requirement, "Deployed", {"branch": "aiteam/reading-list\u202e", "remote": "r"})

    [started] = [m for m in mail.outbox if m.to == ["alice@acme.test"]]
    assert started.subject == f"Delivered: {SHOWN}"
    assert started.body.startswith(f"The team started a conversation with you about {SHOWN} (")
    assert "\nWhat happened:\n> The requirement was delivered: branch aiteam/reading-list pushed to r.\n" in started.body
    assert "\nOpen the conversation in the admin: http" in started.body

    mail.outbox.clear()
    assert conversation_digests_queue(now=timezone.now() + timedelta(days=1)) == 1
    [digest] = mail.outbox
    assert f"\nDelivered: {SHOWN} (2 unread)\n" in digest.body
    assert "  [assistant] Merged. Open it: http://evil.example/merge [0m\n" in digest.body
    [link] = [line for line in digest.body.splitlines() if line.lstrip().startswith("Open it")]
    assert link.startswith("  Open it in the admin: http")
    for message in (started, digest):
        assert not any(char in part for char in HIDDEN for part in (message.subject, message.body))
    assert set(Notification.objects.filter(channel="email").values_list("state", flat=True)) == {"sent"}
