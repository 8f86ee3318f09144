# ruff: noqa: F811 - the fixtures `slack` and `workspace` are test_slack's, imported
"""A Slack post with buttons is rewritten (chat.update) once what they decide is decided anywhere, against a fake
Slack on a local socket: the decision shown, the buttons gone, once per decision, and Slack's refusals bounded."""
from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from lifecycle.actors import Actor
from lifecycle.models import ActionApproval, Notification, OutboxEvent, ReviewTask
from lifecycle.notifications import slack as slack_channel
from lifecycle.notifications import slack_updates
from lifecycle.notifications.sending import notification_send
from lifecycle.notifications.slack_updates import queue_slack_updates
from lifecycle.services import sla
from lifecycle.services.cancellation import requirement_cancel_request
from lifecycle.services.outbox import relay
from lifecycle.services.story_edits import stories_version
from tests.conftest import api_for, staff_client
from tests.conversations import script_answer
from tests.review_tasks import age, open_review
from tests.unit.test_slack import OPS, announcing, buttons_of, press, say, slack, workspace  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def lines_of(body):
    return [e["text"] for block in body["blocks"] if block["type"] == "context" for e in block["elements"]]


def ask_for_approval(scripted, slack, project, *, title="Reading list", ts="400.1"):
    """Rita asks in Slack for a review task's approval; the answer is posted into her thread with its buttons."""
    task = open_review(project, title=title)
    script_answer(scripted, specialists={"review_assistant": [
        ("decide_review_task", {"task_id": str(task.pk), "decision": "approve", "reason": "looks right"})]},
        answer="I asked for the stories to be approved.")
    say(slack, f"<@UBOT> approve the {title}'s stories", ts=ts, kind="app_mention")
    return task, ActionApproval.objects.get(arguments__task_id=str(task.pk))


def approve_in(where, user, approval):
    if where == "api":
        return api_for(user).post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json")
    return staff_client(user).post(f"/admin/lifecycle/conversation/approvals/{approval.pk}/decide/",
                                   {"decision": "approve"})


def updates(state=None):
    rows = Notification.objects.filter(channel="slack_update")
    return rows.filter(state=state) if state else rows


@pytest.mark.parametrize("where", ["api", "admin"])
def test_an_action_approved_elsewhere_rewrites_its_post_once_without_buttons(scripted, slack, workspace,
                                                                             acme_project, rita, where):
    task, approval = ask_for_approval(scripted, slack, acme_project)
    answer = slack.posted[0]
    assert buttons_of(answer)

    response = approve_in(where, rita, approval)

    assert response.status_code in (200, 302)
    [update] = slack.updated
    post = Notification.objects.get(channel="slack", key__startswith=f"message:{answer_id(approval)}:")
    assert (update["channel"], update["ts"]) == ("C1", json.loads(post.body)["ts"])
    assert not buttons_of(update) and update["text"] == answer["text"]
    [line] = lines_of(update)
    assert line.startswith(approval.summary[:50]) and line.endswith(" UTC")
    assert f": approved and done by rita via {where} at " in line
    assert not buttons_of(slack.messages[("C1", update["ts"])])  # what Slack shows now
    assert updates("sent").count() == 1

    event = OutboxEvent.objects.get(name="ActionDecided")
    OutboxEvent.objects.filter(pk=event.pk).update(sent_at=None)
    relay()  # relayed again: no second row, no second update
    assert len(slack.updated) == 1 and updates().count() == 1


def test_a_press_in_slack_decides_as_before_and_the_post_shows_the_result(scripted, slack, workspace, acme_project):
    task, approval = ask_for_approval(scripted, slack, acme_project)
    response = press(slack, f"approval:reject:{approval.pk}")

    assert response.status_code == 200 and response.json()["detail"] == "action rejected"
    [update] = slack.updated
    assert not buttons_of(update)
    assert lines_of(update)[0].startswith(f"{approval.summary}: rejected by rita via slack at ")
    assert ReviewTask.objects.get(pk=task.pk).is_pending  # a rejected request runs nothing
    assert press(slack, f"approval:approve:{approval.pk}").status_code == 409


def test_a_review_task_decided_in_the_api_rewrites_its_channel_post(scripted, slack, workspace, acme_project, rita):
    announcing(acme_project)
    task = age(open_review(acme_project, kind="stories_approval"), hours=30)
    script_answer(scripted, specialists={"review_assistant": []}, answer="Two stories wait for you.")
    sla.review_sweep(now=timezone.now())
    facts = slack.posted[0]

    response = api_for(rita).post(f"/api/v1/review-tasks/{task.pk}/decision/",
                                  {"decision": "approve", "reason": "read them",
                                   "stories_version": stories_version(task)}, format="json")

    assert response.status_code == 200, response.content
    [update] = slack.updated
    assert (update["channel"], update["text"]) == (OPS, facts["text"]) and not buttons_of(update)
    assert lines_of(update)[0].startswith("Decided: Approve by rita via api at ")
    assert "read them" not in str(update)  # a person's words the post never showed stay out of it


def test_a_task_that_expires_with_its_requirement_loses_its_buttons(scripted, slack, workspace, acme_project, rita):
    announcing(acme_project)
    task = age(open_review(acme_project, kind="stories_approval"), hours=30)
    script_answer(scripted, specialists={"review_assistant": []}, answer="Two stories wait for you.")
    sla.review_sweep(now=timezone.now())

    requirement_cancel_request(requirement_id=task.requirement_id, actor=Actor.human(rita, "api"), reason="dropped")

    [update] = slack.updated
    assert not buttons_of(update) and lines_of(update) == ["No longer waits for a decision: expired"]


def test_an_expiring_event_updates_the_posts_of_the_tasks_it_expired_only(scripted, slack, workspace, acme_project,
                                                                          rita):
    announcing(acme_project)
    task = age(open_review(acme_project, kind="stories_approval"), hours=30)
    script_answer(scripted, specialists={"review_assistant": []}, answer="Two stories wait for you.")
    sla.review_sweep(now=timezone.now())
    requirement_cancel_request(requirement_id=task.requirement_id, actor=Actor.human(rita, "api"), reason="dropped")
    assert OutboxEvent.objects.get(name="RequirementCancelled").payload["expired_tasks"] == [str(task.pk)]
    assert updates().count() == 1

    def relayed(payload):
        with transaction.atomic():
            queue_slack_updates(OutboxEvent.objects.create(requirement_id=task.requirement_id, name="PlaybookChanged",
                                                           payload=payload, sent_at=timezone.now()))
        return updates().count()

    assert relayed({"from": "new_feature", "to": "bug_fix", "expired_tasks": []}) == 1  # expired earlier: not again
    assert relayed({"from": "new_feature", "to": "bug_fix"}) == 2  # an older event: every expired task's post


def test_a_deleted_message_is_refused_once_and_logged_not_retried(scripted, slack, workspace, acme_project, rita,
                                                                  caplog):
    task, approval = ask_for_approval(scripted, slack, acme_project)
    [ts] = [ts for (channel, ts), body in slack.messages.items() if body is slack.posted[0]]
    slack.forget("C1", ts)

    with caplog.at_level(logging.WARNING, logger="lifecycle.notifications.sending"):
        api_for(rita).post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json")

    [row] = updates()
    assert row.state == "failed" and "message_not_found" in row.last_error
    assert any("message_not_found" in r.getMessage() for r in caplog.records)
    notification_send(row.pk, now=timezone.now() + timedelta(days=1))
    calls = [r for r in slack.requests if r.path == "/api/chat.update"]
    assert len(calls) == 1 and not slack.updated


def test_a_rate_limited_update_is_retried_then_given_up_after_the_last_attempt(scripted, slack, workspace,
                                                                               acme_project, rita, settings):
    task, approval = ask_for_approval(scripted, slack, acme_project)
    slack.rate_limit_next()
    api_for(rita).post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json")
    [row] = updates()
    assert row.state == "pending" and "429" in row.last_error and "retry after 1s" in row.last_error

    notification_send(row.pk, now=row.next_attempt_at)
    assert len(slack.updated) == 1 and updates("sent").count() == 1

    settings.AITEAM_NOTIFY_MAX_ATTEMPTS = 3
    _, second = ask_for_approval(scripted, slack, acme_project, title="Second list", ts="401.1")
    assert buttons_of(slack.posted[-1])
    slack.rate_limit_next(10)
    api_for(rita).post(f"/api/v1/approvals/{second.pk}/approve/", {}, format="json")
    row = updates().order_by("-pk").first()
    for day in range(1, 6):
        notification_send(row.pk, now=timezone.now() + timedelta(days=day))
    row.refresh_from_db()
    assert (row.state, row.attempts) == ("failed", 3) and len(slack.updated) == 1


def test_a_rate_limited_update_waits_as_long_as_slack_asked(scripted, slack, workspace, acme_project, rita,
                                                             settings):
    settings.AITEAM_NOTIFY_BACKOFF_S = 30
    task, approval = ask_for_approval(scripted, slack, acme_project)
    slack.rate_limit_next(retry_after="600")
    before = timezone.now()
    api_for(rita).post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json")
    [row] = updates()
    assert row.state == "pending" and "retry after 600s" in row.last_error
    assert timedelta(seconds=600) <= row.next_attempt_at - before < timedelta(seconds=660)  # not the 30 s backoff

    notification_send(row.pk, now=before + timedelta(seconds=300))  # not due: nothing is sent
    assert not slack.updated
    notification_send(row.pk, now=row.next_attempt_at)
    assert len(slack.updated) == 1 and updates("sent").count() == 1


def test_a_decision_before_the_post_is_made_waits_for_it(scripted, slack, workspace, acme_project, rita):
    slack.rate_limit_next()  # the answer's post waits for its retry
    task, approval = ask_for_approval(scripted, slack, acme_project)
    post = Notification.objects.get(channel="slack", key__startswith="message:")
    assert post.state == "pending" and not slack.posted

    api_for(rita).post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json")
    [row] = updates()
    assert row.state == "pending" and "not made yet" in row.last_error

    notification_send(post.pk, now=post.next_attempt_at)  # the post shows the decision already
    [answer] = [p for p in slack.posted if p["text"] == "I asked for the stories to be approved."]
    assert not buttons_of(answer) and "approved and done by rita" in lines_of(answer)[0]
    notification_send(row.pk, now=timezone.now() + timedelta(days=1))
    assert updates("sent").count() == 1 and not buttons_of(slack.updated[0])


def answer_id(approval):
    return ActionApproval.objects.select_related("tool_call").get(pk=approval.pk).tool_call.message_id


def test_an_update_overtaken_by_a_later_one_is_sent_again_as_drawn_now(scripted, slack, workspace, acme_project,
                                                                        rita, monkeypatch):
    first, second = open_review(acme_project, title="First list"), open_review(acme_project, title="Second list")
    script_answer(scripted, specialists={"review_assistant": [
        ("decide_review_task", {"task_id": str(task.pk), "decision": "approve", "reason": "looks right"})
        for task in (first, second)]}, answer="I asked for both lists to be approved.")
    say(slack, "<@UBOT> approve both lists", ts="402.1", kind="app_mention")
    one, two = (ActionApproval.objects.get(arguments__task_id=str(task.pk)) for task in (first, second))
    [ts] = [ts for (channel, ts), body in slack.messages.items() if body is slack.posted[0]]
    assert len(buttons_of(slack.posted[0])) == 4
    slack.rate_limit_next()  # the first decision's update waits for its retry
    api_for(rita).post(f"/api/v1/approvals/{one.pk}/reject/", {}, format="json")
    [late] = updates()

    draw = slack_channel.shown
    overtaken = []

    def drawn_then_overtaken(note, message):
        """The first update draws the post while the second request waits; before it reaches Slack, the second
        is decided and its own update, drawn after both decisions, lands first."""
        drawing = draw(note, message)
        if not overtaken:
            overtaken.append("drawn")  # before the second update, which draws too
            overtaken.append(api_for(rita).post(f"/api/v1/approvals/{two.pk}/reject/", {}, format="json"))
        return drawing

    monkeypatch.setattr(slack_channel, "shown", drawn_then_overtaken)
    notification_send(late.pk, now=timezone.now() + timedelta(days=1))

    assert overtaken[1].status_code == 200
    stale, *again = [u for u in slack.updated if u["ts"] == ts][1:]
    assert len(buttons_of(stale)) == 2 and again  # the stale drawing landed last, then was drawn and sent again
    shown_now = slack.messages[("C1", ts)]
    assert not buttons_of(shown_now) and len(lines_of(shown_now)) == 2
    assert updates("sent").count() == 2


def test_a_post_that_keeps_changing_is_sent_three_times_then_retried_later(scripted, slack, workspace, acme_project,
                                                                           rita, monkeypatch):
    task, approval = ask_for_approval(scripted, slack, acme_project)
    draw, drawings = slack_channel.shown, iter(range(100))
    monkeypatch.setattr(slack_channel, "shown", lambda note, message: (
        f"{draw(note, message)[0]} ({next(drawings)})", draw(note, message)[1]))

    api_for(rita).post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json")

    [row] = updates()
    assert len(slack.updated) == slack_updates.SENDS == 3
    assert row.state == "pending" and "changed while it was updated 3 times" in row.last_error


def test_a_request_whose_task_is_decided_another_way_is_superseded_and_loses_its_buttons(scripted, slack, workspace,
                                                                                        acme_project, rita):
    task, approval = ask_for_approval(scripted, slack, acme_project)

    response = api_for(rita).post(f"/api/v1/review-tasks/{task.pk}/decision/",
                                  {"decision": "reject", "reason": "not yet"}, format="json")

    assert response.status_code == 200, response.content
    approval.refresh_from_db()
    assert approval.state == ActionApproval.State.SUPERSEDED and approval.decided_at is not None
    assert approval.result == "not needed: the review task was decided another way: reject by rita"
    [update] = slack.updated
    assert not buttons_of(update)
    assert lines_of(update) == [f"{approval.summary}: no longer asked, {approval.result}"]
    assert approval.conversation.messages.filter(author="system", text__contains="no longer asked").count() == 1
    late = api_for(rita).post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json")
    assert late.status_code == 409  # what it asked for is not done twice

    OutboxEvent.objects.filter(name="ReviewTaskResolved").update(sent_at=None)
    relay()  # relayed again: nothing closes twice
    assert len(slack.updated) == 1
    assert approval.conversation.messages.filter(author="system", text__contains="no longer asked").count() == 1


def test_a_request_to_cancel_a_requirement_that_ended_is_superseded(scripted, slack, workspace, acme_project, rita):
    task = open_review(acme_project, title="Old list")
    other = open_review(acme_project, title="Other list")
    script_answer(scripted, specialists={"review_assistant": [
        ("cancel_requirement", {"requirement_id": str(task.requirement_id), "reason": "not wanted"}),
        ("cancel_requirement", {"requirement_id": str(other.requirement_id), "reason": "not wanted either"})]},
        answer="I asked for both to be cancelled.")
    say(slack, "<@UBOT> cancel the old and the other list", ts="403.1", kind="app_mention")
    ended, waiting = (ActionApproval.objects.get(arguments__requirement_id=str(t.requirement_id)) for t in (task, other))

    requirement_cancel_request(requirement_id=task.requirement_id, actor=Actor.human(rita, "api"), reason="dropped")

    ended.refresh_from_db(), waiting.refresh_from_db()
    assert ended.state == ActionApproval.State.SUPERSEDED
    assert ended.result == "not needed: the requirement is already cancelled"
    assert waiting.state == ActionApproval.State.PENDING  # another requirement's request still waits
    [update] = slack.updated
    assert len(buttons_of(update)) == 2 and f"{ended.summary}: no longer asked" in lines_of(update)[0]
