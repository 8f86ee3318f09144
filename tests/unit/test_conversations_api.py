"""The conversation and approval endpoints (ADR 36): a question answers 201 with the pending answer; the caller
sees their own conversations only (others' and other organizations' are 404); approval requests are decided by
those who may (403 otherwise, 409 once decided)."""
import pytest

from lifecycle.models import ActionApproval, Conversation, ConversationParticipant, Requirement, ReviewTask
from tests.conftest import api_for
from tests.conversations import script_answer
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/api/v1/conversations/"


def ask(client, scripted, text="What is it waiting for?", answer="It waits for the stories' approval.", **fields):
    script_answer(scripted, specialists={"status_reporter": [("requirement_status", {})]}, answer=answer)
    return client.post(URL, {"text": text, **fields}, format="json")


def ask_for_approval(client, scripted, task):
    script_answer(scripted, specialists={"review_assistant": [
        ("decide_review_task", {"task_id": str(task.pk), "decision": "approve", "reason": "looks right"})]},
        answer="I asked for the stories to be approved.")
    response = client.post(URL, {"text": "Approve the stories", "requirement": str(task.requirement_id)}, format="json")
    assert response.status_code == 201, response.content
    return ActionApproval.objects.get()


def test_a_question_answers_201_with_the_pending_answer_then_the_detail_shows_it_done(scripted, acme_project, rita):
    task = open_review(acme_project, title="Reading list")
    client = api_for(rita)
    response = ask(client, scripted, requirement=str(task.requirement_id))

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["requirement"] == str(task.requirement_id) and body["started_by"] == "rita"
    assert (body["answer"]["author"], body["answer"]["state"]) == ("assistant", "pending")
    assert response["Location"] == f"{URL}{body['id']}/"

    detail = client.get(f"{URL}{body['id']}/").json()
    question, answer = detail["messages"]
    assert (question["author"], question["user"], question["text"]) == ("person", "rita", "What is it waiting for?")
    assert (answer["state"], answer["text"]) == ("done", "It waits for the stories' approval.")
    assert answer["route"]["specialists"] == ["status_reporter"]
    assert [(c["tool"], c["kind"], c["status"]) for c in answer["tool_calls"]] == [("requirement_status", "read", "done")]
    assert detail["summary"] is None


def test_the_next_message_answers_201_and_the_messages_list_in_order(scripted, acme, rita):
    client = api_for(rita)
    conversation = ask(client, scripted).json()["id"]
    script_answer(scripted, specialists={"status_reporter": []}, answer="The older one.")
    response = client.post(f"{URL}{conversation}/messages/", {"text": "Which is older?"}, format="json")

    assert response.status_code == 201 and response.json()["state"] == "pending"
    listed = client.get(f"{URL}{conversation}/messages/").json()
    assert listed["count"] == 4
    assert [(m["seq"], m["author"]) for m in listed["results"]] == [
        (1, "person"), (2, "assistant"), (3, "person"), (4, "assistant")]
    assert listed["results"][-1]["text"] == "The older one."


def test_a_folded_summary_is_shown_as_the_summary(scripted, acme, rita):
    client = api_for(rita)
    conversation = ask(client, scripted).json()["id"]
    Conversation.objects.filter(pk=conversation).update(summary="Rita asked what it waits for.", summary_through=2)
    detail = client.get(f"{URL}{conversation}/").json()
    assert detail["summary"] == {"text": "Rita asked what it waits for.", "through_seq": 2}


def test_the_list_holds_the_callers_conversations_only(scripted, acme, rita, alice, oscar):
    mine = ask(api_for(rita), scripted).json()["id"]
    theirs = ask(api_for(alice), scripted).json()["id"]
    assert [c["id"] for c in api_for(rita).get(URL).json()["results"]] == [mine]
    assert [c["id"] for c in api_for(alice).get(URL).json()["results"]] == [theirs]
    assert api_for(oscar).get(URL).json()["results"] == []


def test_another_persons_or_organizations_conversation_is_404(scripted, acme, rita, alice, oscar):
    conversation = ask(api_for(rita), scripted).json()["id"]
    for stranger in (alice, oscar):
        client = api_for(stranger)
        assert client.get(f"{URL}{conversation}/").status_code == 404
        assert client.get(f"{URL}{conversation}/messages/").status_code == 404
        assert client.post(f"{URL}{conversation}/messages/", {"text": "hello"}, format="json").status_code == 404


def test_asking_about_another_organizations_requirement_or_in_it_is_no_such_field(scripted, acme, rita, oscar):
    from lifecycle.models import Project

    theirs = open_review(Project.objects.get(organization__slug="globex"), title="Globex secret")
    client = api_for(rita)
    about = client.post(URL, {"text": "hi", "requirement": str(theirs.requirement_id)}, format="json")
    assert about.status_code == 400 and about.json() == {"requirement": ["no such requirement"]}
    inside = client.post(URL, {"text": "hi", "organization": str(theirs.organization_id)}, format="json")
    assert inside.status_code == 400 and inside.json() == {"organization": ["no such organization"]}
    assert not Conversation.objects.exists()


@pytest.mark.parametrize(("body", "field"), [
    ({}, "text"), ({"text": 42}, "text"), ({"text": "   "}, "text"), ({"text": "x" * 4001}, "text"),
    ({"text": "hi", "colour": "red"}, "colour"), ({"text": "hi", "requirement": "not-a-uuid"}, "requirement")])
def test_bad_input_is_400_with_the_field_named(acme, rita, body, field):
    response = api_for(rita).post(URL, body, format="json")
    assert response.status_code == 400 and field in response.json(), response.content
    assert not Conversation.objects.exists()


def test_without_a_token_it_is_401(acme, rita):
    client = api_for(None)
    assert client.get(URL).status_code == 401
    assert client.post(URL, {"text": "hi"}, format="json").status_code == 401
    assert client.get("/api/v1/approvals/").status_code == 401


def test_an_approval_request_is_listed_for_who_may_decide_it_and_approving_runs_it(scripted, acme_project, rita):
    task = open_review(acme_project, title="Reading list")
    client = api_for(rita)
    approval = ask_for_approval(client, scripted, task)

    listed = client.get("/api/v1/approvals/").json()["results"]
    assert [(a["id"], a["action"], a["state"]) for a in listed] == [(str(approval.pk), "stories_approval:approve",
                                                                       "pending")]
    response = client.post(f"/api/v1/approvals/{approval.pk}/approve/", {"reason": "yes"}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["state"], response.json()["decided_by"], response.json()["preauthorized"]) == (
        "done", "rita", False)
    decided = ReviewTask.objects.get(pk=task.pk)
    assert (decided.decision, decided.decided_by) == ("approve", rita)
    assert client.get("/api/v1/approvals/").json()["results"] == []

    again = client.post(f"/api/v1/approvals/{approval.pk}/reject/", {}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "illegal_transition"


def test_rejecting_records_the_reason_and_runs_nothing(scripted, acme_project, rita):
    task = open_review(acme_project, title="Reading list")
    client = api_for(rita)
    approval = ask_for_approval(client, scripted, task)
    response = client.post(f"/api/v1/approvals/{approval.pk}/reject/", {"reason": "not yet"}, format="json")
    assert response.status_code == 200
    assert (response.json()["state"], response.json()["reason"]) == ("rejected", "not yet")
    assert ReviewTask.objects.get(pk=task.pk).is_pending


def test_who_may_not_decide_gets_403_and_another_organization_404(scripted, acme_project, rita, alice, oscar):
    task = open_review(acme_project, title="Reading list")
    approval = ask_for_approval(api_for(rita), scripted, task)

    assert api_for(alice).get("/api/v1/approvals/").json()["results"] == []  # a submitter decides no review
    # outside the conversation, a submitter does not see it at all; taking part in it, sees it and may not decide
    assert api_for(alice).post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json").status_code == 404
    ConversationParticipant.objects.create(conversation=approval.conversation, user=alice)
    assert api_for(alice).post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json").status_code == 403
    assert api_for(oscar).get("/api/v1/approvals/").json()["results"] == []
    assert api_for(oscar).post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json").status_code == 404
    assert api_for(oscar).get(f"/api/v1/approvals/{approval.pk}/").status_code == 404
    assert ActionApproval.objects.get().state == "pending" and ReviewTask.objects.get(pk=task.pk).is_pending


def test_an_approval_decision_refuses_unknown_fields(scripted, acme_project, rita):
    approval = ask_for_approval(api_for(rita), scripted, open_review(acme_project, title="Reading list"))
    response = api_for(rita).post(f"/api/v1/approvals/{approval.pk}/approve/", {"force": True}, format="json")
    assert response.status_code == 400 and "force" in response.json()


def ask_to_cancel(client, scripted, task):
    script_answer(scripted, specialists={"review_assistant": [
        ("cancel_requirement", {"requirement_id": str(task.requirement_id), "reason": "not wanted"})]},
        answer="I asked for it to be cancelled.")
    asked = client.post(URL, {"text": "Cancel it", "requirement": str(task.requirement_id)}, format="json")
    assert asked.status_code == 201, asked.content
    return ActionApproval.objects.get()


def test_a_cancel_request_is_decided_by_whoever_may_cancel_only(scripted, acme_project, rita, alice, sam):
    """A cancel is the submitter's to withdraw, or a reviewer's of the project: another submitter in the
    conversation sees the request but may neither approve nor reject it (403), and it stays theirs to decide. The
    submitter sees it without taking part in the conversation."""
    task = open_review(acme_project, title="Reading list")
    Requirement.objects.filter(pk=task.requirement_id).update(submitted_by=alice)
    approval = ask_to_cancel(api_for(rita), scripted, task)
    ConversationParticipant.objects.create(conversation=approval.conversation, user=sam)

    assert api_for(sam).get("/api/v1/approvals/").json()["results"] == []
    for verb in ("approve", "reject"):
        assert api_for(sam).post(f"/api/v1/approvals/{approval.pk}/{verb}/", {}, format="json").status_code == 403
    assert ActionApproval.objects.get().state == "pending"
    assert [a["id"] for a in api_for(alice).get("/api/v1/approvals/").json()["results"]] == [str(approval.pk)]
    assert [a["id"] for a in api_for(rita).get("/api/v1/approvals/").json()["results"]] == [str(approval.pk)]

    response = api_for(alice).post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json")

    assert response.status_code == 200 and response.json()["state"] == "done"
    assert Requirement.objects.get(pk=task.requirement_id).state == "cancelled"


def test_the_submitter_rejects_a_cancel_of_their_requirement_and_others_of_theirs_stay_hidden(
        scripted, acme_project, rita, alice, sam):
    mine, theirs = open_review(acme_project, title="Reading list"), open_review(acme_project, title="Other")
    Requirement.objects.filter(pk=mine.requirement_id).update(submitted_by=alice)
    Requirement.objects.filter(pk=theirs.requirement_id).update(submitted_by=sam)
    approval = ask_to_cancel(api_for(rita), scripted, mine)

    assert api_for(sam).get(f"/api/v1/approvals/{approval.pk}/").status_code == 404  # not sam's requirement
    assert api_for(alice).get(f"/api/v1/approvals/{approval.pk}/").json()["action"] == "cancel_requirement"
    response = api_for(alice).post(f"/api/v1/approvals/{approval.pk}/reject/", {"reason": "still wanted"}, format="json")
    assert response.status_code == 200 and response.json()["state"] == "rejected"
    assert Requirement.objects.get(pk=mine.requirement_id).state != "cancelled"


def test_a_submitter_who_left_the_organization_no_longer_sees_the_cancel(scripted, acme_project, rita, alice, oscar):
    from lifecycle.models import Membership

    task = open_review(acme_project, title="Reading list")
    Requirement.objects.filter(pk=task.requirement_id).update(submitted_by=alice)
    approval = ask_to_cancel(api_for(rita), scripted, task)
    Membership.objects.filter(user=alice).delete()
    for outsider in (alice, oscar):
        assert api_for(outsider).get("/api/v1/approvals/").json()["results"] == []
        assert api_for(outsider).post(f"/api/v1/approvals/{approval.pk}/approve/", {}, format="json").status_code == 404
    assert ActionApproval.objects.get().state == "pending"


def test_an_approval_shows_the_texts_approving_records_as_the_approvers_words(scripted, acme_project, rita):
    task = open_review(acme_project, kind="budget_exhausted", title="Reading list", context={})
    script_answer(scripted, specialists={"review_assistant": [
        ("decide_review_task", {"task_id": str(task.pk), "decision": "override_budget", "reason": "<b>worth it</b>",
                                "budget": {"requirement": {"cost_usd": "9.5"}}})]}, answer="Asked.")
    api_for(rita).post(URL, {"text": "More budget", "requirement": str(task.requirement_id)}, format="json")

    [listed] = api_for(rita).get("/api/v1/approvals/").json()["results"]
    assert listed["proposed"] == {"budget": '{"requirement": {"cost_usd": "9.5"}}', "reason": "<b>worth it</b>"}


def test_the_approvals_list_pages_over_every_request_the_caller_may_decide_and_counts_only_those(
        acme, acme_project, rita, alice, sam):
    from django.contrib.auth.models import Group

    from lifecycle.services.approvals import may_decide
    from tests.factories import MembershipFactory, ProjectFactory

    grouped = ProjectFactory(organization=acme, slug="web", settings={"reviewers_group": "web-reviewers"})
    rosa = MembershipFactory(organization=acme, role="reviewer", user__username="rosa").user
    rosa.groups.add(Group.objects.create(name="web-reviewers"))
    mine = Requirement.objects.create(organization=acme, project=acme_project, brief="b", submitted_by=alice)

    def ask(project, count, action="stories_approval:approve", **arguments):
        ActionApproval.objects.bulk_create([ActionApproval(
            organization=acme, project=project, action=action, summary=f"{action} #{i}", requested_for=rita,
            arguments=arguments or {"task_id": "00000000-0000-0000-0000-000000000000", "decision": "approve"})
            for i in range(count)])

    ask(acme_project, 230)
    ask(grouped, 30)  # decided by web-reviewers (rosa) only
    ask(acme_project, 1, action="cancel_requirement", requirement_id=str(mine.pk), reason="r")  # alice's own too
    ActionApproval.objects.filter(summary="stories_approval:approve #0", project=grouped).update(state="rejected")

    first = api_for(rita).get("/api/v1/approvals/?limit=200").json()
    rest = api_for(rita).get("/api/v1/approvals/?limit=200&offset=200").json()
    assert (first["count"], len(first["results"]), len(rest["results"]), rest["next"]) == (231, 200, 31, None)
    assert first["next"].endswith("offset=200")
    listed = {row["id"] for row in first["results"] + rest["results"]}
    for user, count in ((rita, 231), (rosa, 260), (alice, 1), (sam, 0)):
        pages = api_for(user).get("/api/v1/approvals/?limit=200").json()
        assert pages["count"] == count, user
        decidable = {str(a.pk) for a in ActionApproval.objects.all() if may_decide(user, a)}
        assert len(decidable) == count and (user != rita or listed == decidable)
