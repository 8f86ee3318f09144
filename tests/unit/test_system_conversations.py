"""The system speaks first (issue 24): events open a conversation addressed to the submitter and the project's
watchers, with the event's facts and the team's analysis; each person hears of it by e-mail at once or in a
daily digest, as they chose."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.db import transaction
from django.utils import timezone

from lifecycle.handlers import speak_first
from lifecycle.models import Conversation, ConversationEmail, Notification, OutboxEvent, Requirement
from lifecycle.notifications.conversation_mail import conversation_digests_queue
from lifecycle.services import sla, system_messages
from lifecycle.services.conversations import mark_read, unread_count
from lifecycle.services.outbox import emit, relay
from lifecycle.services.reviews import review_open
from tests.conftest import staff_client
from tests.conversations import script_answer
from tests.review_tasks import age, open_review

pytestmark = pytest.mark.django_db(transaction=True)
ANALYSIS = "The team's analysis: nothing is left for you to do."


@pytest.fixture
def watched(acme_project, alice, sam, rita, oscar):
    """Alice submits; Sam and Oscar (another organization's) are named watchers; Rita is neither."""
    for user in (alice, sam, rita):
        user.email = f"{user.username}@acme.test"
        user.save()
    acme_project.settings = {"watchers": ["sam", "oscar"]}
    acme_project.save()
    return acme_project


def a_requirement(project, submitter, state="in_development"):
    return Requirement.objects.create(organization=project.organization, project=project, brief="A reading list",
                                      title="Reading list", state=state, submitted_by=submitter)


def emitted(requirement, name, payload):
    with transaction.atomic():
        return emit(requirement, name, payload)


def opened_by(name):
    conversation = Conversation.objects.get(event=name)
    messages = list(conversation.messages.order_by("seq"))
    return conversation, messages[0], messages[1]


def test_a_delivery_opens_a_conversation_with_the_branch_and_the_pull_request(scripted, watched, alice, sam):
    script_answer(scripted, specialists={"status_reporter": []}, answer=ANALYSIS)
    event = emitted(a_requirement(watched, alice), "Deployed", {
        "branch": "aiteam/reading-list", "remote": "https://x-access-token:s3cr3t@github.com/acme/app.git",
        "pull_request": {"number": 7, "url": "https://github.com/acme/app/pull/7", "draft": True}})

    conversation, facts, answer = opened_by("Deployed")
    assert conversation.outbox_event_id == event.pk and conversation.started_by is None
    assert conversation.title == "Delivered: Reading list"
    assert sorted(conversation.participants.values_list("user__username", flat=True)) == ["alice", "sam"]
    assert facts.author == "system" and "branch aiteam/reading-list" in facts.text
    assert "Pull request #7 (a draft): https://github.com/acme/app/pull/7" in facts.text
    assert "s3cr3t" not in facts.text and "https://github.com/acme/app.git" in facts.text
    assert (answer.author, answer.state, answer.text) == ("assistant", "done", ANALYSIS)
    assert "Explain this event" in scripted.requests[0].messages[0]["content"]  # the worker answered the facts
    assert unread_count(alice) == 2 and unread_count(sam) == 2


def test_a_failed_delivery_tells_the_reason(scripted, watched, alice):
    script_answer(scripted, specialists={"troubleshooter": []}, answer=ANALYSIS)
    emitted(a_requirement(watched, alice), "DeliveryFailed", {
        "error": "push rejected: https://bot:tok3n@github.com/acme/app.git is protected", "compensations": ["pr"]})

    _, facts, answer = opened_by("DeliveryFailed")
    assert "push rejected: https://github.com/acme/app.git is protected" in facts.text and "tok3n" not in facts.text
    assert "Undone after the failure: pr." in facts.text and answer.state == "done"


def test_an_escalation_after_the_third_attempt_shows_the_attempts_and_the_failing_tests(scripted, watched, alice):
    watched.settings = {"watchers": ["alice"]}
    watched.save()
    script_answer(scripted, specialists={"troubleshooter": []}, answer=ANALYSIS)
    open_review(watched, kind="escalation", title="Reading list", context={
        "attempts": 3, "routing_rule": "loop_exhausted", "failing_tests": ["test_add", "test_remove"]})

    conversation, facts, answer = opened_by("ReviewTaskOpened")
    assert conversation.title == "Escalated to a human: Reading list"
    assert list(conversation.participants.values_list("user__username", flat=True)) == ["alice"]
    assert "Attempts: 3; routing rule: loop_exhausted." in facts.text
    assert "Failing tests: test_add; test_remove" in facts.text and answer.text == ANALYSIS


def test_other_review_tasks_opened_start_no_conversation(scripted, watched):
    watched.settings = {"watchers": ["alice"]}
    watched.save()
    open_review(watched, kind="stories_approval")
    assert not Conversation.objects.exists() and not scripted.requests


def test_a_budget_run_out_shows_the_budget_table(scripted, watched, alice):
    script_answer(scripted, specialists={"status_reporter": []}, answer=ANALYSIS)
    requirement = a_requirement(watched, alice)
    exhausted = [{"scope": "requirement", "dimension": "cost_usd", "spent": "2.10", "limit": "2.00"}]
    with transaction.atomic():
        emit(requirement, "BudgetExhausted", {"step": "develop", "exhausted": exhausted})
        review_open(requirement, kind="budget_exhausted", question="Override the budget?", context={
            "exhausted": exhausted, "budget": {"requirement": {"cost_usd": {
                "spent": "2.10", "limit": "2.00", "remaining": "0"}, "tokens": {
                "spent": 90000, "limit": None, "remaining": None}}}})

    _, facts, _ = opened_by("BudgetExhausted")
    assert "The budget ran out before step 'develop'" in facts.text
    assert "requirement cost_usd: spent 2.10 of 2.00" in facts.text
    assert "requirement cost_usd: 2.10 / 2.00 / 0" in facts.text
    assert "requirement tokens: 90000 / unlimited / unlimited" in facts.text


def test_a_review_task_past_its_sla_opens_one_conversation_however_often_it_is_reminded(scripted, watched, alice):
    watched.settings = {"watchers": ["alice"]}
    watched.save()
    task = age(open_review(watched, kind="stories_approval"), hours=30)
    script_answer(scripted, specialists={"review_assistant": []}, answer=ANALYSIS)
    sla.review_sweep(now=timezone.now())
    sla.review_sweep(now=timezone.now() + timedelta(hours=5))  # the second reminder

    assert OutboxEvent.objects.filter(name="ReviewTaskReminded").count() == 2
    conversation, facts, _ = opened_by("ReviewTaskReminded")
    assert Conversation.objects.count() == 1 and conversation.title == "Review overdue: Reading list"
    assert f"round {task.round}" in facts.text and "past its SLA deadline" in facts.text
    assert "the SLA policy reminded its reviewers" in facts.text and "Decide Reading list?" in facts.text


def test_an_sla_escalation_opens_a_conversation(scripted, watched, alice):
    watched.settings = {"watchers": ["alice"]}
    watched.save()
    task = open_review(watched, kind="step_failed")
    age(task, hours=(task.sla_deadline - timezone.now()).total_seconds() / 3600 + 0.5)  # overdue, not yet decided
    script_answer(scripted, specialists={"review_assistant": []}, answer=ANALYSIS)
    sla.review_sweep(now=timezone.now())

    _, facts, _ = opened_by("ReviewTaskEscalated")
    assert "the SLA policy escalated it" in facts.text


def test_an_event_handled_twice_opens_one_conversation_and_sends_one_email(scripted, watched, alice):
    script_answer(scripted, specialists={"status_reporter": []}, answer=ANALYSIS)
    event = emitted(a_requirement(watched, alice), "Deployed", {"branch": "b", "remote": "r", "pull_request": None})
    speak_first(event)  # the same occurrence again, as a relay that redelivered it
    OutboxEvent.objects.filter(pk=event.pk).update(sent_at=None)
    relay()

    assert Conversation.objects.filter(outbox_event=event).count() == 1
    assert sorted(m.to[0] for m in mail.outbox if m.subject.startswith("Delivered")) == ["alice@acme.test",
                                                                                         "sam@acme.test"]


def test_no_conversation_for_a_requirement_nobody_watches(scripted, acme_project):
    emitted(a_requirement(acme_project, None), "Deployed", {"branch": "b", "remote": "r"})
    assert not Conversation.objects.exists() and not scripted.requests


def test_each_person_hears_at_once_in_a_digest_or_not_at_all(scripted, watched, alice, sam, rita):
    ConversationEmail.objects.create(user=sam, delivery="daily_digest")
    ConversationEmail.objects.create(user=alice, delivery="off")
    watched.settings = {"watchers": ["sam", "rita"]}
    watched.save()
    script_answer(scripted, specialists={"status_reporter": []}, answer=ANALYSIS)
    emitted(a_requirement(watched, alice), "Deployed", {"branch": "aiteam/reading-list", "remote": "r"})

    at_once = [m for m in mail.outbox if m.subject.startswith("Delivered")]
    assert [m.to for m in at_once] == [["rita@acme.test"]] and "branch aiteam/reading-list" in at_once[0].body
    mail.outbox.clear()

    tomorrow = timezone.now() + timedelta(days=1)
    assert conversation_digests_queue(now=tomorrow) == 1
    assert conversation_digests_queue(now=tomorrow) == 0  # the same day's digest is sent once
    assert conversation_digests_queue(now=tomorrow + timedelta(days=1)) == 0  # nothing new since
    (digest,) = mail.outbox
    assert digest.to == ["sam@acme.test"] and digest.subject == "Your conversations: 2 unread messages"
    assert "Delivered: Reading list (2 unread)" in digest.body and ANALYSIS in digest.body
    assert Notification.objects.get(event="conversation_digest").state == "sent"


def test_a_digest_holds_only_what_is_unread_and_new(scripted, watched, alice, sam):
    ConversationEmail.objects.create(user=sam, delivery="daily_digest")
    script_answer(scripted, specialists={"status_reporter": []}, answer=ANALYSIS)
    emitted(a_requirement(watched, alice), "Deployed", {"branch": "b", "remote": "r"})
    mark_read(Conversation.objects.get(), sam)

    assert conversation_digests_queue(now=timezone.now() + timedelta(days=1)) == 0
    assert not [m for m in mail.outbox if m.to == ["sam@acme.test"]]


def test_a_person_sets_their_own_choice_in_the_admin(alice, sam):
    theirs = ConversationEmail.objects.create(user=alice, delivery="off")
    client = staff_client(sam)
    response = client.post("/admin/lifecycle/conversationemail/add/", {"delivery": "daily_digest"})
    assert response.status_code == 302
    assert ConversationEmail.objects.get(user=sam).delivery == "daily_digest"
    assert client.get(f"/admin/lifecycle/conversationemail/{theirs.pk}/change/").status_code == 302  # not found: to the index
    client.post("/admin/lifecycle/conversationemail/add/", {"delivery": "off"})  # a second choice replaces the first
    assert list(ConversationEmail.objects.filter(user=sam).values_list("delivery", flat=True)) == ["off"]


def test_a_failing_occasion_never_holds_back_the_event(scripted, watched, alice, monkeypatch):
    def broken(event, requirement):
        raise KeyError("branch")

    monkeypatch.setitem(system_messages.OCCASIONS, "Deployed", broken)
    event = emitted(a_requirement(watched, alice), "Deployed", {})
    assert OutboxEvent.objects.get(pk=event.pk).sent_at is not None  # the other handlers ran and were kept
    assert not Conversation.objects.exists() and not Notification.objects.exists()
