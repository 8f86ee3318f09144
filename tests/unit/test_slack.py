"""Slack, both ways (issue 24), against a fake Slack on a local socket: signed Events API and button requests in,
chat.postMessage into the bound thread out, and the system speaking first in a project's channel."""
from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from lifecycle.actors import Actor
from lifecycle.handlers import speak_first
from lifecycle.models import (
    ActionApproval,
    Conversation,
    ConversationChannelBinding,
    Message,
    Notification,
    OutboxEvent,
    Requirement,
    ReviewTask,
    SlackIdentity,
    SlackWorkspace,
)
from lifecycle.notifications.sending import notification_send
from lifecycle.services import sla
from lifecycle.services.outbox import emit, relay
from lifecycle.services.story_edits import stories_version, story_edit, story_version
from tests.conversations import script_answer
from tests.fakes.slack_server import FakeSlackServer, actions_body, event_body
from tests.review_tasks import age, open_review

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN, SECRET, TEAM, OPS = "xoxb-test-bot-token", "slack-signing-secret-for-tests", "T0ACME", "C0ACMEOPS"
EVENTS, ACTIONS = "/webhooks/slack/events/", "/webhooks/slack/interactive/"


@pytest.fixture
def slack(settings, monkeypatch):
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SECRET)
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    with FakeSlackServer(TOKEN, SECRET) as server:
        settings.AITEAM_SLACK_API_URL = server.api_url
        server.add_channel("C1")
        server.add_channel(OPS)
        yield server


@pytest.fixture
def workspace(acme, rita):
    workspace = SlackWorkspace.objects.create(organization=acme, team_id=TEAM, bot_token_env="SLACK_BOT_TOKEN")
    SlackIdentity.objects.create(workspace=workspace, slack_user_id="URITA", user=rita)
    return workspace


def post(slack, path, body, *, content_type="application/json", **headers):
    headers = {**slack.signed(body), **headers}
    return Client().post(path, data=body, content_type=content_type, **headers)


def say(slack, text, *, ts, thread_ts="", user="URITA", kind="message", event_id=None, channel="C1", **headers):
    event = {"type": kind, "user": user, "text": text, "channel": channel, "ts": ts, "channel_type": "channel",
             **({"thread_ts": thread_ts} if thread_ts else {})}
    return post(slack, EVENTS, event_body(TEAM, event, event_id or f"Ev{ts}"), **headers)


def press(slack, value, user="URITA"):
    return post(slack, ACTIONS, actions_body(TEAM, user, value), content_type="application/x-www-form-urlencoded")


def test_url_verification_answers_the_challenge_of_a_signed_request(slack):
    body = json.dumps({"token": "x", "challenge": "3eZbrw1aB", "type": "url_verification"}).encode()
    response = post(slack, EVENTS, body)
    assert response.status_code == 200 and response.json() == {"challenge": "3eZbrw1aB"}


@pytest.mark.parametrize(("secret", "age_s"), [
    ("not-the-signing-secret", 0),
    (SECRET, 310),  # older than five minutes: a replay
    (SECRET, -310),
], ids=["bad", "stale", "future"])
def test_a_request_without_a_good_fresh_signature_is_refused(slack, secret, age_s):
    body = json.dumps({"challenge": "c", "type": "url_verification"}).encode()
    signed = slack.signed(body, at=time.time() - age_s, secret=secret)
    response = Client().post(EVENTS, data=body, content_type="application/json", **signed)
    assert response.status_code == 401 and "challenge" not in response.json()


def test_a_signature_over_another_body_is_refused(slack):
    signed = slack.signed(b'{"type": "url_verification", "challenge": "a"}')
    response = Client().post(ACTIONS, data=b"payload=%7B%7D", content_type="application/x-www-form-urlencoded",
                             **signed)
    assert response.status_code == 401


def test_without_a_signing_secret_everything_is_refused(slack, monkeypatch):
    monkeypatch.delenv("SLACK_SIGNING_SECRET")
    response = post(slack, EVENTS, json.dumps({"challenge": "c", "type": "url_verification"}).encode())
    assert response.status_code == 401


def test_a_mention_starts_a_conversation_and_its_answer_is_posted_into_the_thread(scripted, slack, workspace, rita):
    script_answer(scripted, specialists={"status_reporter": []}, answer="Two requirements are in flight.")
    response = say(slack, "<@UBOT> what is in flight?", ts="100.1", kind="app_mention")

    assert response.status_code == 200 and response.json()["detail"] == "started"
    binding = ConversationChannelBinding.objects.get()
    assert (binding.channel, binding.external_id) == ("slack", f"{TEAM}:C1:100.1")
    question = binding.conversation.messages.get(seq=1)
    assert (question.user, question.channel, question.text) == (rita, "slack", "what is in flight?")
    [posted] = slack.posted
    assert (posted["channel"], posted["thread_ts"], posted["text"]) == ("C1", "100.1", "Two requirements are in flight.")
    assert slack.requests[0].headers["authorization"] == f"Bearer {TOKEN}" and TOKEN not in slack.requests[0].path
    assert Notification.objects.get(channel="slack").state == "sent"


def test_an_answer_cannot_mention_the_channel_or_forge_a_link_in_the_text_slack_reads(scripted, slack, workspace):
    script_answer(scripted, specialists={"status_reporter": []}, answer="<!channel> see <https://evil.example|the PR> & more")
    say(slack, "<@UBOT> what is in flight?", ts="100.1", kind="app_mention")

    [posted] = slack.posted  # the top-level text is mrkdwn (notifications show it); the blocks are plain_text
    assert posted["text"] == "&lt;!channel&gt; see &lt;https://evil.example|the PR&gt; &amp; more"
    assert posted["blocks"][0]["text"] == {"type": "plain_text", "emoji": False,
                                           "text": "<!channel> see <https://evil.example|the PR> & more"}


def test_a_reply_in_the_thread_is_the_mapped_persons_message_and_a_repeat_adds_nothing(scripted, slack, workspace, rita):
    script_answer(scripted, specialists={"status_reporter": []}, answer="first answer")
    say(slack, "<@UBOT> what is in flight?", ts="100.1", kind="app_mention")
    script_answer(scripted, specialists={"status_reporter": []}, answer="second answer")
    response = say(slack, "and which is oldest?", ts="100.5", thread_ts="100.1")

    assert response.json()["detail"] == "posted"
    conversation = ConversationChannelBinding.objects.get().conversation
    reply = conversation.messages.get(seq=3)
    assert (reply.author, reply.user, reply.text, reply.channel) == ("person", rita, "and which is oldest?", "slack")
    assert [p["text"] for p in slack.posted] == ["first answer", "second answer"]

    retried = say(slack, "and which is oldest?", ts="100.5", thread_ts="100.1", HTTP_X_SLACK_RETRY_NUM="1")
    also_a_mention = say(slack, "and which is oldest?", ts="100.5", thread_ts="100.1", kind="app_mention",
                         event_id="EvOther")
    assert retried.json()["detail"] == also_a_mention.json()["detail"] == "repeat"
    assert conversation.messages.count() == 4 and len(slack.posted) == 2



def test_two_people_starting_in_one_thread_at_once_both_go_into_its_conversation(scripted, slack, workspace, acme,
                                                                                 rita, sam, monkeypatch):
    """Between sam's lookup of the thread's binding (none yet) and his writing one, rita's request commits its
    own: sam's write fails on the unique binding, which is no Slack retry; his message goes into rita's
    conversation. A true retry of his is still a repeat."""
    from lifecycle.services import slack as slack_service

    SlackIdentity.objects.create(workspace=workspace, slack_user_id="USAM", user=sam)
    theirs = Conversation.objects.create(organization=acme, title="rita's", started_by=rita)
    looked_up = slack_service.thread_binding

    def rita_binds_right_after_the_lookup(key):
        if not ConversationChannelBinding.objects.exists():
            ConversationChannelBinding.objects.create(conversation=theirs, channel="slack", external_id=key)
            return None
        return looked_up(key)

    monkeypatch.setattr(slack_service, "thread_binding", rita_binds_right_after_the_lookup)
    script_answer(scripted, specialists={"status_reporter": []}, answer="The export step failed.")
    response = say(slack, "<@UBOT> what failed?", ts="50.2", thread_ts="50.0", user="USAM", kind="app_mention")

    assert response.json()["detail"] == "posted"
    assert Conversation.objects.get() == theirs
    question = theirs.messages.get(author="person")
    assert (question.user, question.text, question.channel) == (sam, "what failed?", "slack")
    assert [p["text"] for p in slack.posted] == ["The export step failed."]
    retried = say(slack, "<@UBOT> what failed?", ts="50.2", thread_ts="50.0", user="USAM", kind="app_mention",
                  HTTP_X_SLACK_RETRY_NUM="1")
    assert retried.json()["detail"] == "repeat" and theirs.messages.count() == 2


def test_a_refused_message_is_answered_in_its_thread_with_why_once(slack, workspace):
    long = "<@UBOT> " + "x" * 4100
    response = say(slack, long, ts="100.1", kind="app_mention")

    assert response.status_code == 200
    assert response.json()["detail"] == "refused: write a message of 1 to 4000 characters"
    assert not Conversation.objects.exists()
    [posted] = slack.posted
    assert (posted["channel"], posted["thread_ts"]) == ("C1", "100.1")
    assert posted["text"] == "Your message was not taken: write a message of 1 to 4000 characters"
    retried = say(slack, long, ts="100.1", kind="app_mention", HTTP_X_SLACK_RETRY_NUM="1")
    also_a_message = say(slack, long, ts="100.1", event_id="EvOther")
    assert retried.json()["detail"] == also_a_message.json()["detail"] == "repeat"
    assert len(slack.posted) == 1 and Notification.objects.get().state == "sent"


def test_a_refused_reply_in_a_bound_thread_is_answered_there_and_adds_nothing(scripted, slack, workspace, sam):
    SlackIdentity.objects.create(workspace=workspace, slack_user_id="USAM", user=sam)
    script_answer(scripted, specialists={"status_reporter": []}, answer="first answer")
    say(slack, "<@UBOT> what is in flight?", ts="100.1", kind="app_mention")
    response = say(slack, "y" * 4001, ts="100.5", thread_ts="100.1", user="USAM")

    assert response.json()["detail"].startswith("refused: ")
    conversation = ConversationChannelBinding.objects.get().conversation
    assert conversation.messages.count() == 2 and not conversation.participants.filter(user=sam).exists()
    assert [(p["thread_ts"], p["text"][:27]) for p in slack.posted] == [
        ("100.1", "first answer"), ("100.1", "Your message was not taken:")]

def test_an_unmapped_user_or_an_unbound_thread_is_ignored(slack, workspace):
    unmapped = say(slack, "<@UBOT> hello", ts="200.1", user="USTRANGER", kind="app_mention")
    unbound = say(slack, "just chatting", ts="200.2", thread_ts="199.0")

    assert unmapped.status_code == unbound.status_code == 200
    assert unmapped.json()["detail"].startswith("ignored: Slack user USTRANGER is not mapped")
    assert unbound.json()["detail"].startswith("ignored: not in a thread bound")
    assert not Message.objects.exists() and not ConversationChannelBinding.objects.exists()


def test_a_bots_message_in_the_thread_is_not_taken_as_a_persons(slack, workspace):
    event = {"type": "message", "subtype": "bot_message", "bot_id": "B0BOT", "text": "an answer of ours",
             "channel": "C1", "ts": "300.2", "thread_ts": "300.1"}
    response = post(slack, EVENTS, event_body(TEAM, event))
    assert response.json()["detail"].startswith("ignored: an edit, a join or a bot's message")



@pytest.mark.parametrize("subtype,extra", [("thread_broadcast", {}), ("file_share", {"files": [{"id": "F1"}]})])
def test_a_reply_also_sent_to_the_channel_or_with_a_file_is_the_persons_message(scripted, slack, workspace, rita,
                                                                                subtype, extra):
    script_answer(scripted, specialists={"status_reporter": []}, answer="first answer")
    say(slack, "<@UBOT> what is in flight?", ts="100.1", kind="app_mention")
    script_answer(scripted, specialists={"status_reporter": []}, answer="second answer")
    event = {"type": "message", "subtype": subtype, "user": "URITA", "text": "and which is oldest?", "channel": "C1",
             "ts": "100.5", "thread_ts": "100.1", "channel_type": "channel", **extra}
    response = post(slack, EVENTS, event_body(TEAM, event, "Ev100.5"))

    assert response.json()["detail"] == "posted"
    reply = ConversationChannelBinding.objects.get().conversation.messages.get(seq=3)
    assert (reply.author, reply.user, reply.text) == ("person", rita, "and which is oldest?")
    assert [p["text"] for p in slack.posted] == ["first answer", "second answer"]


@pytest.mark.parametrize("subtype", ["message_changed", "message_deleted", "channel_join"])
def test_an_edit_a_deletion_or_a_join_in_the_thread_is_not_a_message(scripted, slack, workspace, subtype):
    script_answer(scripted, specialists={"status_reporter": []}, answer="first answer")
    say(slack, "<@UBOT> what is in flight?", ts="100.1", kind="app_mention")
    event = {"type": "message", "subtype": subtype, "user": "URITA", "text": "edited", "channel": "C1",
             "ts": "100.7", "thread_ts": "100.1"}
    response = post(slack, EVENTS, event_body(TEAM, event))
    assert response.json()["detail"].startswith("ignored: an edit, a join or a bot's message")
    assert Message.objects.filter(author="person").count() == 1

def ask_for_approval(scripted, slack, acme_project):
    task = open_review(acme_project, title="Reading list")
    script_answer(scripted, specialists={"review_assistant": [
        ("decide_review_task", {"task_id": str(task.pk), "decision": "approve", "reason": "looks right"})]},
        answer="I asked for the stories to be approved.")
    say(slack, "<@UBOT> approve the reading list's stories", ts="400.1", kind="app_mention")
    return task, ActionApproval.objects.get()


def test_a_button_approves_the_request_as_the_mapped_person(scripted, slack, workspace, acme_project, rita):
    task, approval = ask_for_approval(scripted, slack, acme_project)
    [answer] = slack.posted
    buttons = [e for block in answer["blocks"] if block["type"] == "actions" for e in block["elements"]]
    assert [b["value"] for b in buttons] == [f"approval:approve:{approval.pk}", f"approval:reject:{approval.pk}"]

    response = press(slack, buttons[0]["value"])

    assert response.status_code == 200 and response.json()["detail"] == "action done"
    approval.refresh_from_db()
    assert (approval.state, approval.decided_by, approval.decided_via) == ("done", rita, "slack")
    decided = ReviewTask.objects.get(pk=task.pk)
    assert (decided.decision, decided.decided_by, decided.decided_via) == ("approve", rita, "slack")
    assert "approved by rita" in slack.posted[-1]["text"]  # the system's note, in the thread too
    assert press(slack, buttons[0]["value"]).status_code == 409  # pressed again: nothing more


def test_a_request_shows_in_slack_what_approving_records_as_the_pressers_words(scripted, slack, workspace,
                                                                              acme_project):
    task = open_review(acme_project, title="Reading list")
    script_answer(scripted, specialists={"review_assistant": [
        ("decide_review_task", {"task_id": str(task.pk), "decision": "reject",
                                "reason": "@channel <https://evil.example|ok>\u202e\nrita checked it"})]}, answer="Asked.")
    say(slack, "<@UBOT> reject the reading list's stories", ts="400.1", kind="app_mention")

    [answer] = slack.posted
    lines = [b["elements"][0] for b in answer["blocks"] if b["type"] == "context"]
    assert [(line["type"], line["text"]) for line in lines] == [("plain_text", (
        "Approving records these as your own words; the assistant wrote them:\nreason:\n"
        "> @channel <https://evil.example|ok>\n> rita checked it"))]
    assert [b["type"] for b in answer["blocks"]] == ["section", "context", "actions"]


def test_an_unmapped_slack_user_cannot_press_a_button(scripted, slack, workspace, acme_project):
    task, approval = ask_for_approval(scripted, slack, acme_project)
    response = press(slack, f"approval:approve:{approval.pk}", user="USTRANGER")
    assert response.status_code == 403
    assert ActionApproval.objects.get(pk=approval.pk).state == "pending" and ReviewTask.objects.get(pk=task.pk).is_pending


def test_a_mapped_user_without_the_permission_is_refused(scripted, slack, workspace, acme_project, sam):
    task, approval = ask_for_approval(scripted, slack, acme_project)
    SlackIdentity.objects.create(workspace=workspace, slack_user_id="USAM", user=sam)  # a submitter, not a reviewer
    assert press(slack, f"approval:approve:{approval.pk}", user="USAM").status_code == 403
    assert ActionApproval.objects.get(pk=approval.pk).state == "pending"


def test_a_button_decides_a_review_task_as_the_mapped_person(slack, workspace, acme_project, rita):
    task = open_review(acme_project, title="Reading list")
    response = press(slack, f"review:approve:{task.pk}")
    assert response.status_code == 200
    decided = ReviewTask.objects.get(pk=task.pk)
    assert (decided.decision, decided.decided_by, decided.decided_via) == ("approve", rita, "slack")


def test_a_button_cannot_reach_another_organizations_task(slack, workspace, oscar):
    from lifecycle.models import Project

    theirs = open_review(Project.objects.get(organization__slug="globex"), title="Globex secret")
    assert press(slack, f"review:approve:{theirs.pk}").status_code == 404
    assert ReviewTask.objects.get(pk=theirs.pk).is_pending


def test_an_organizations_admin_maps_its_slack_users_and_other_members_see_none(workspace, alice, rita, oscar):
    from tests.conftest import staff_client
    from tests.factories import MembershipFactory

    ada = MembershipFactory(organization=workspace.organization, role="admin", user__username="ada").user
    add = "/admin/lifecycle/slackidentity/add/"
    assert staff_client(ada).post(add, {"workspace": workspace.pk, "slack_user_id": "UALICE",
                                        "user": alice.pk}).status_code == 302
    refused = staff_client(ada).post(add, {"workspace": workspace.pk, "slack_user_id": "UOSCAR", "user": oscar.pk})
    assert refused.status_code == 200 and "user" in refused.context["adminform"].form.errors
    assert set(SlackIdentity.objects.values_list("slack_user_id", flat=True)) == {"URITA", "UALICE"}

    listed = staff_client(rita).get("/admin/lifecycle/slackidentity/")  # a reviewer, not an admin
    assert listed.status_code == 200 and listed.context["cl"].result_count == 0


def test_a_rate_limited_post_is_retried_and_posted_once(scripted, slack, workspace):
    slack.rate_limit_next()
    script_answer(scripted, specialists={"status_reporter": []}, answer="Later, but once.")
    say(slack, "<@UBOT> anything new?", ts="500.1", kind="app_mention")
    note = Notification.objects.get(channel="slack")
    assert note.state == "pending" and "429" in note.last_error and TOKEN not in note.last_error and not slack.posted

    notification_send(note.pk, now=note.next_attempt_at)
    notification_send(note.pk, now=note.next_attempt_at)
    assert [p["text"] for p in slack.posted] == ["Later, but once."]
    assert Notification.objects.get(pk=note.pk).state == "sent"


def test_a_conversation_started_in_slack_goes_on_on_the_web_and_the_thread_sees_it(scripted, slack, workspace, rita):
    from agents.llm.base import LLMError
    from lifecycle.actors import Actor
    from lifecycle.services.conversations import message_post

    script_answer(scripted, specialists={"status_reporter": []}, answer="first answer")
    say(slack, "<@UBOT> what is in flight?", ts="100.1", kind="app_mention")
    conversation = ConversationChannelBinding.objects.get().conversation
    scripted.enqueue(LLMError("the model is down"))  # the web question's answer fails for good
    message_post(conversation_id=conversation.pk, actor=Actor.human(rita, "web"), text="and which is oldest?")

    assert [p["text"] for p in slack.posted] == [
        "first answer", "rita (on the web): and which is oldest?",
        "The team could not answer: the model could not answer: the model is down"]
    assert all(p["thread_ts"] == "100.1" for p in slack.posted)
    assert conversation.messages.get(seq=4).state == "failed"


# The system speaks first in the project's channel


def announcing(project, **settings):
    """Rita (mapped to Slack) watches the project, whose system conversations go to the OPS channel."""
    project.settings = {"watchers": ["rita"], "slack_channel": OPS, **settings}
    project.save()
    return project


def delivered(project, submitter=None):
    requirement = Requirement.objects.create(organization=project.organization, project=project, brief="A reading list",
                                             title="Reading list", state="in_development", submitted_by=submitter)
    with transaction.atomic():
        return emit(requirement, "Deployed", {"branch": "aiteam/reading-list", "remote": "r", "pull_request": {
            "number": 7, "url": "https://github.com/acme/app/pull/7", "draft": False}})


def buttons_of(post):
    return [e["value"] for block in post["blocks"] if block["type"] == "actions" for e in block["elements"]]


def test_a_delivery_posts_its_facts_in_the_channel_and_the_analysis_in_their_thread(scripted, slack, workspace,
                                                                                      acme_project, alice):
    announcing(acme_project)
    script_answer(scripted, specialists={"status_reporter": []}, answer="Merge pull request #7 when you are ready.")
    delivered(acme_project, alice)

    facts, analysis = slack.posted
    assert facts["channel"] == OPS and "thread_ts" not in facts and not buttons_of(facts)
    assert facts["text"].startswith("Delivered: Reading list\n") and "Pull request #7: https://github" in facts["text"]
    assert (analysis["channel"], analysis["text"]) == (OPS, "Merge pull request #7 when you are ready.")
    thread = analysis["thread_ts"]
    assert thread == "1700000001.000100"  # the ts the fake answered the facts' post with
    conversation = Conversation.objects.get(event="Deployed")
    assert list(conversation.bindings.values_list("external_id", flat=True)) == [f"{TEAM}:{OPS}:{thread}"]
    assert set(Notification.objects.filter(channel="slack").values_list("state", flat=True)) == {"sent"}

    script_answer(scripted, specialists={"status_reporter": []}, answer="It is not a draft.")
    reply = say(slack, "is it a draft?", ts="1700000100.000200", thread_ts=thread, channel=OPS)
    assert reply.json()["detail"] == "posted"
    assert conversation.messages.get(seq=3).text == "is it a draft?"
    assert (slack.posted[-1]["thread_ts"], slack.posted[-1]["text"]) == (thread, "It is not a draft.")


def test_an_overdue_review_task_is_posted_with_its_buttons_and_a_press_decides_it(scripted, slack, workspace,
                                                                                   acme_project, rita):
    announcing(acme_project)
    task = age(open_review(acme_project, kind="stories_approval"), hours=30)
    script_answer(scripted, specialists={"review_assistant": []}, answer="Two stories wait for you.")
    sla.review_sweep(now=timezone.now())

    facts, analysis = slack.posted
    assert facts["text"].startswith("Review overdue: Reading list") and "thread_ts" not in facts
    version = stories_version(task)  # the stories as they were posted: a press approves those or nothing
    assert buttons_of(facts) == [f"review:approve:{task.pk}:{version}", f"review:reject:{task.pk}:{version}"]
    assert analysis["thread_ts"] and not buttons_of(analysis)

    assert press(slack, buttons_of(facts)[0]).status_code == 200
    decided = ReviewTask.objects.get(pk=task.pk)
    assert (decided.decision, decided.decided_by, decided.decided_via) == ("approve", rita, "slack")


def test_a_stories_button_pressed_after_an_edit_decides_nothing(scripted, slack, workspace, acme_project, rita):
    """The button was offered for the stories as they were then (ADR 45): edited since, a press is refused."""
    announcing(acme_project)
    task = age(open_review(acme_project, kind="stories_approval"), hours=30)
    script_answer(scripted, specialists={"review_assistant": []}, answer="Two stories wait for you.")
    sla.review_sweep(now=timezone.now())
    approve = buttons_of(slack.posted[0])[0]
    story = task.requirement.stories.get(position=1)
    story_edit(task_id=task.pk, story_id=story.pk, actor=Actor.human(rita, "admin"),
               changes={"title": "Rewritten after the post"}, version=story_version(story))

    response = press(slack, approve)
    assert response.status_code == 409 and "the stories changed since they were shown to you" in response.json()["detail"]
    assert ReviewTask.objects.get(pk=task.pk).is_pending


def test_an_escalation_offers_only_the_options_it_has(scripted, slack, workspace, acme_project):
    announcing(acme_project)
    script_answer(scripted, specialists={"troubleshooter": []}, answer="Three attempts failed.")
    task = open_review(acme_project, kind="escalation", context={"attempts": 3})
    assert buttons_of(slack.posted[0]) == [f"review:reject:{task.pk}"]  # an escalation is never simply approved


def test_a_project_without_a_channel_posts_nothing_to_slack(scripted, slack, workspace, acme_project, alice):
    announcing(acme_project, slack_channel="")
    script_answer(scripted, specialists={"status_reporter": []}, answer="Delivered.")
    delivered(acme_project, alice)
    assert Conversation.objects.get().messages.count() == 2  # the web and e-mail have it
    assert not slack.posted and not Notification.objects.filter(channel="slack").exists()
    assert not ConversationChannelBinding.objects.exists()


def test_an_event_relayed_twice_is_posted_once(scripted, slack, workspace, acme_project, alice):
    announcing(acme_project)
    script_answer(scripted, specialists={"status_reporter": []}, answer="Delivered.")
    event = delivered(acme_project, alice)
    speak_first(event)
    OutboxEvent.objects.filter(pk=event.pk).update(sent_at=None)
    relay()

    assert [p["text"].split("\n")[0] for p in slack.posted] == ["Delivered: Reading list", "Delivered."]
    assert ConversationChannelBinding.objects.count() == 1 and Notification.objects.filter(channel="slack").count() == 2


def test_a_lost_answer_is_posted_again_once_at_most(scripted, slack, workspace, acme_project, settings, monkeypatch):
    settings.AITEAM_NOTIFY_TIMEOUT_S = 0.2
    monkeypatch.setattr(slack, "reply_delay", lambda request: 0.6)  # Slack posts it, its answer comes too late
    script_answer(scripted, specialists={"status_reporter": []}, answer="Delivered.")
    announcing(acme_project)
    delivered(acme_project)  # the facts' post: its answer lost, no thread known, no analysis posted there
    note = Notification.objects.get(channel="slack", event="conversation_started")
    assert note.state == "pending" and "ReadTimeout" in note.last_error

    notification_send(note.pk, now=Notification.objects.get(pk=note.pk).next_attempt_at)
    notification_send(note.pk, now=timezone.now() + timedelta(days=1))
    note.refresh_from_db()
    assert note.state == "failed" and "may be in the channel already" in note.last_error
    assert len(slack.posted) == 2 and not ConversationChannelBinding.objects.exists()



def test_a_thread_answer_whose_slack_answer_is_lost_is_posted_twice_at_most(scripted, slack, workspace, settings,
                                                                            monkeypatch):
    settings.AITEAM_NOTIFY_TIMEOUT_S = 0.2
    monkeypatch.setattr(slack, "reply_delay", lambda request: 0.6)  # Slack posts it, its answer comes too late
    script_answer(scripted, specialists={"status_reporter": []}, answer="Two requirements are in flight.")
    say(slack, "<@UBOT> what is in flight?", ts="100.1", kind="app_mention")
    note = Notification.objects.get(channel="slack")
    assert note.state == "pending" and "ReadTimeout" in note.last_error

    for day in range(1, 6):  # every retry the backoff allows
        notification_send(note.pk, now=timezone.now() + timedelta(days=day))
    note.refresh_from_db()
    assert note.state == "failed" and "may be in the channel already" in note.last_error
    assert [p["text"] for p in slack.posted] == ["Two requirements are in flight."] * 2

def test_a_post_bound_by_an_earlier_attempt_is_not_posted_again(scripted, slack, workspace, acme_project):
    script_answer(scripted, specialists={"status_reporter": []}, answer="Delivered.")
    announcing(acme_project)
    delivered(acme_project)
    note = Notification.objects.get(event="conversation_started")
    Notification.objects.filter(pk=note.pk).update(state="pending", attempts=1)  # as if its outcome was never recorded

    notification_send(note.pk, now=timezone.now() + timedelta(days=1))
    assert len(slack.posted) == 2 and Notification.objects.get(pk=note.pk).state == "sent"


def test_a_thread_post_whose_ts_was_recorded_is_not_posted_again(scripted, slack, workspace):
    script_answer(scripted, specialists={"status_reporter": []}, answer="Once only.")
    say(slack, "<@UBOT> anything new?", ts="501.1", kind="app_mention")
    note = Notification.objects.get(channel="slack")
    assert json.loads(note.body)["ts"]
    Notification.objects.filter(pk=note.pk).update(state="pending", attempts=1)  # as if the worker died after posting

    notification_send(note.pk, now=timezone.now() + timedelta(days=1))
    assert [p["text"] for p in slack.posted] == ["Once only."]
    assert Notification.objects.get(pk=note.pk).state == "sent"


def test_the_project_form_takes_a_channel_id_of_the_organizations_one_workspace(acme, acme_project):
    from tests.conftest import staff_client
    from tests.factories import MembershipFactory, project_form_data

    boss = staff_client(MembershipFactory(organization=acme, role="admin", user__username="boss").user)

    def save(channel):
        response = boss.post(f"/admin/lifecycle/project/{acme_project.pk}/change/",
                             project_form_data(acme_project, settings=json.dumps({"slack_channel": channel})))
        return response.status_code, response.context and response.context["adminform"].form.errors["settings"]

    assert "slack_channel must be a Slack channel's id such as C0123ABCD" in save("#ops")[1][0]
    assert "the organization has no Slack workspaces" in save(OPS)[1][0]
    SlackWorkspace.objects.create(organization=acme, team_id=TEAM, bot_token_env="SLACK_BOT_TOKEN")
    assert save(OPS)[0] == 302
    acme_project.refresh_from_db()
    assert acme_project.settings == {"slack_channel": OPS}


def test_a_timestamp_of_other_digits_is_refused_not_a_crash(slack):
    body = b'{"type": "url_verification", "challenge": "x"}'
    headers = {**slack.signed(body), "HTTP_X_SLACK_REQUEST_TIMESTAMP": "\u00b2\u00b3"}
    response = Client().post(EVENTS, data=body, content_type="application/json", **headers)
    assert response.status_code == 401


def test_slack_gets_the_title_facts_buttons_and_answer_without_control_or_format_characters(scripted, slack, workspace,
                                                                                             acme_project):
    announcing(acme_project)
    age(open_review(acme_project, title="Reading\u202e\u200b list\x1b[2J\r\nOpen it: http://evil.example"), hours=30)
    script_answer(scripted, specialists={"review_assistant": []}, answer="Approve it.\u200b\r\nThen:\x1b[0m \u202etxt.exe")
    sla.review_sweep(now=timezone.now())

    facts, analysis = slack.posted
    title = "Reading list [2J Open it: http://evil.example"
    assert facts["text"].startswith(f"Review overdue: {title}\nThe Stories Approval task (round 1)")
    assert facts["text"].endswith("\nThe question: Decide Reading list [2J\nOpen it: http://evil.example?")
    labels = [e["text"]["text"] for block in facts["blocks"] if block["type"] == "actions" for e in block["elements"]]
    assert labels == [f"Approve: Stories Approval #1: {title}"[:75], "Reject"]
    assert analysis["text"] == "Approve it.\nThen: [0m txt.exe"
    shown = [p["text"] for p in slack.posted] + [p["blocks"][0]["text"]["text"] for p in slack.posted] + labels
    assert not any(char in text for char in ("\u202e", "\u200b", "\x1b", "\r") for text in shown)
    assert set(Notification.objects.filter(channel="slack").values_list("state", flat=True)) == {"sent"}
