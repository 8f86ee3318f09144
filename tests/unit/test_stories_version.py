"""Optimistic concurrency on stories: a decision and an edit say which text they were made on (the page's and the
API's stories_version, a story's version); stories another reviewer edited since are refused (409) and nothing is
decided or saved. Rita and Rosa review the same task; Rosa edits while Rita reads."""
import re

import pytest

from lifecycle.actors import Actor
from lifecycle.models import ActionApproval, Conversation, ReviewTask, StateTransition, StoryEdit
from lifecycle.services import approvals
from lifecycle.services.approvals import approval_decide
from lifecycle.services.story_edits import stories_version, story_edit, story_version
from tests.conftest import api_for, staff_client
from tests.factories import MembershipFactory
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)
INBOX = "/admin/lifecycle/reviewtask/"
STORY_2 = {"title": "Story 2", "as_a": "reader", "i_want": "feature 2", "so_that": "I read more",
           "acceptance_criteria": "criterion 2", "priority": "must", "story_points": "3"}


@pytest.fixture
def rosa(acme):
    return MembershipFactory(organization=acme, role="reviewer", user__username="rosa").user


def rosa_edits(task, rosa, title="Story 2, rewritten by Rosa"):
    """Rosa saves an edit of story 2 through her own review page, as it is now."""
    story = task.requirement.stories.get(position=2)
    response = staff_client(rosa).post(f"{INBOX}{task.pk}/stories/{story.pk}/",
                                       {**STORY_2, "title": title, "version": story_version(story)})
    assert response.status_code == 302, response.content.decode()


def shown_version(html: str, name: str) -> str:
    return re.search(rf'name="{name}" value="([0-9a-f]*)"', html).group(1)


# --- The API.

def test_the_api_approves_the_stories_at_the_version_it_read(acme_project, rita):
    task = open_review(acme_project)
    client = api_for(rita)
    version = client.get(f"/api/v1/review-tasks/{task.pk}/").json()["stories_version"]
    assert version == stories_version(task) and len(version) == 64

    response = client.post(f"/api/v1/review-tasks/{task.pk}/decision/", {"decision": "approve",
                                                                         "stories_version": version}, format="json")
    assert response.status_code == 200, response.json()
    assert set(task.requirement.stories.values_list("state", flat=True)) == {"approved"}
    row = StateTransition.objects.get(subject_id=str(task.pk), event="resolve")
    assert row.metadata["stories_version"] == version


def test_the_api_refuses_to_approve_stories_edited_since_they_were_read(acme_project, rita, rosa):
    task = open_review(acme_project)
    client = api_for(rita)
    read = client.get(f"/api/v1/review-tasks/{task.pk}/").json()
    rosa_edits(task, rosa)

    response = client.post(f"/api/v1/review-tasks/{task.pk}/decision/", {
        "decision": "approve", "stories_version": read["stories_version"]}, format="json")
    body = response.json()
    assert response.status_code == 409 and body["code"] == "stories_changed"
    assert "the stories changed since they were shown to you" in body["detail"]
    assert "story 2 'Story 2, rewritten by Rosa' by rosa" in body["detail"]
    task.refresh_from_db()
    assert task.is_pending and not task.decision
    assert set(task.requirement.stories.values_list("state", flat=True)) == {"draft"}

    again = client.get(f"/api/v1/review-tasks/{task.pk}/").json()
    assert again["context"]["stories"][1]["title"] == "Story 2, rewritten by Rosa"
    assert again["stories_version"] != read["stories_version"]
    response = client.post(f"/api/v1/review-tasks/{task.pk}/decision/", {
        "decision": "approve", "stories_version": again["stories_version"]}, format="json")
    assert response.status_code == 200


def test_approving_stories_through_the_api_needs_their_version(acme_project, rita):
    task = open_review(acme_project)
    response = api_for(rita).post(f"/api/v1/review-tasks/{task.pk}/decision/", {"decision": "approve"},
                                  format="json")
    assert response.status_code == 400 and "stories_version" in response.json()
    task.refresh_from_db()
    assert task.is_pending


def test_a_rejection_through_the_api_needs_no_version_but_one_sent_is_checked(acme_project, rita, rosa):
    task = open_review(acme_project)
    stale = stories_version(task)
    rosa_edits(task, rosa)
    client = api_for(rita)
    url = f"/api/v1/review-tasks/{task.pk}/decision/"
    refused = client.post(url, {"decision": "reject", "reason": "too big", "stories_version": stale}, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "stories_changed"
    assert client.post(url, {"decision": "reject", "reason": "too big"}, format="json").status_code == 200


def test_a_task_of_another_kind_has_no_stories_version(acme_project, rita):
    task = open_review(acme_project, kind="clarification")
    client = api_for(rita)
    assert client.get(f"/api/v1/review-tasks/{task.pk}/").json()["stories_version"] is None
    url = f"/api/v1/review-tasks/{task.pk}/decision/"
    sent = client.post(url, {"decision": "answer", "answer": "readers", "stories_version": "0" * 64}, format="json")
    assert sent.status_code == 400 and "stories_version" in sent.json()
    null = client.post(url, {"decision": "answer", "answer": "readers", "stories_version": None}, format="json")
    assert null.status_code == 200


# --- The review page.

def test_the_page_refuses_an_approval_of_stories_edited_after_it_was_loaded(acme_project, rita, rosa):
    task = open_review(acme_project)
    client = staff_client(rita)
    loaded = shown_version(client.get(f"{INBOX}{task.pk}/change/").content.decode(), "stories_version")
    rosa_edits(task, rosa)

    response = client.post(f"{INBOX}{task.pk}/decide/", {"decision": "approve", "reason": "all good",
                                                         "stories_version": loaded})
    html = response.content.decode()
    assert response.status_code == 409
    assert "the stories changed since they were shown to you" in html and "by rosa" in html
    assert "Story 2, rewritten by Rosa" in html  # the text as it is now, on the page
    assert ">all good</textarea>" in html  # what Rita typed is kept
    task.refresh_from_db()
    assert task.is_pending and set(task.requirement.stories.values_list("state", flat=True)) == {"draft"}

    current = shown_version(html, "stories_version")
    assert current == stories_version(task) != loaded
    response = client.post(f"{INBOX}{task.pk}/decide/", {"decision": "approve", "stories_version": current})
    assert response.status_code == 302
    assert set(task.requirement.stories.values_list("state", flat=True)) == {"approved"}


def test_the_page_approves_with_the_version_it_shows(acme_project, rita):
    task = open_review(acme_project)
    client = staff_client(rita)
    html = client.get(f"{INBOX}{task.pk}/change/").content.decode()
    response = client.post(f"{INBOX}{task.pk}/decide/", {"decision": "approve",
                                                         "stories_version": shown_version(html, "stories_version")})
    assert response.status_code == 302
    task.refresh_from_db()
    assert (task.decision, task.decided_by) == ("approve", rita)


def test_a_page_approval_without_the_version_is_refused(acme_project, rita):
    task = open_review(acme_project)
    response = staff_client(rita).post(f"{INBOX}{task.pk}/decide/", {"decision": "approve"})
    assert response.status_code == 400 and "approving stories needs the stories_version" in response.content.decode()
    task.refresh_from_db()
    assert task.is_pending


def test_a_second_edit_of_the_same_story_does_not_silently_undo_the_first(acme_project, rita, rosa):
    task = open_review(acme_project)
    story = task.requirement.stories.get(position=2)
    client = staff_client(rita)
    form = client.get(f"{INBOX}{task.pk}/change/?edit={story.pk}").content.decode()
    opened = shown_version(form, "version")
    rosa_edits(task, rosa)

    response = client.post(f"{INBOX}{task.pk}/stories/{story.pk}/", {**STORY_2, "i_want": "feature 2, by Rita",
                                                                      "version": opened})
    html = response.content.decode()
    assert response.status_code == 409 and "story 2 changed since you opened it" in html
    assert "Story 2, rewritten by Rosa" in html  # the story as it is now, above the form
    assert "feature 2, by Rita</textarea>" in html  # Rita's text, kept in the form
    story.refresh_from_db()
    assert (story.title, story.i_want) == ("Story 2, rewritten by Rosa", "feature 2")
    assert StoryEdit.objects.get().edited_by == rosa

    now = shown_version(html, "version")
    assert now == story_version(story) != opened
    response = client.post(f"{INBOX}{task.pk}/stories/{story.pk}/", {**STORY_2, "title": "Story 2, rewritten by Rosa",
                                                                      "i_want": "feature 2, by Rita", "version": now})
    assert response.status_code == 302
    story.refresh_from_db()
    assert (story.title, story.i_want) == ("Story 2, rewritten by Rosa", "feature 2, by Rita")


def test_an_edit_shown_again_for_its_own_mistake_keeps_the_version_it_was_opened_on(acme_project, rita, rosa):
    """A form refused for a bad value comes back with Rita's text and the version she read, not today's: her save
    after correcting it is still compared with what she read, and Rosa's edit is not silently undone."""
    task = open_review(acme_project)
    story = task.requirement.stories.get(position=2)
    client = staff_client(rita)
    opened = shown_version(client.get(f"{INBOX}{task.pk}/change/?edit={story.pk}").content.decode(), "version")
    rosa_edits(task, rosa)

    mistaken = client.post(f"{INBOX}{task.pk}/stories/{story.pk}/", {**STORY_2, "title": "Rita's title",
                                                                      "priority": "nonsense", "version": opened})
    assert mistaken.status_code == 400 and shown_version(mistaken.content.decode(), "version") == opened
    corrected = client.post(f"{INBOX}{task.pk}/stories/{story.pk}/", {**STORY_2, "title": "Rita's title",
                                                                       "version": opened})
    assert corrected.status_code == 409 and "story 2 changed since you opened it" in corrected.content.decode()
    assert task.requirement.stories.get(position=2).title == "Story 2, rewritten by Rosa"


def test_an_edit_of_another_story_is_not_held_up_by_an_edit_of_this_one(acme_project, rita, rosa):
    task = open_review(acme_project)
    story = task.requirement.stories.get(position=1)
    opened = story_version(story)
    rosa_edits(task, rosa)
    edit = story_edit(task_id=task.pk, story_id=story.pk, actor=Actor.human(rita, "admin"),
                      changes={"title": "Story 1, sharper"}, version=opened)
    assert edit is not None and ReviewTask.objects.get(pk=task.pk).context["stories"][0]["title"] == "Story 1, sharper"


# --- The assistant's request, approved later.

def test_a_request_to_approve_stories_edited_after_it_was_asked_decides_nothing(acme, acme_project, rita, rosa):
    task = open_review(acme_project)
    proposed = approvals.propose_review_decision(organization_id=acme.pk, task_id=task.pk, decision="approve")
    assert proposed.arguments["stories_version"] == stories_version(task)
    conversation = Conversation.objects.create(organization=acme, title="q", started_by=rita,
                                               requirement=task.requirement)
    asked = approvals.approval_request(proposed=proposed, asker=rita, conversation=conversation)
    rosa_edits(task, rosa)

    approval = approval_decide(approval_id=asked.pk, actor=Actor.human(rita, "web"), approve=True)
    assert approval.state == ActionApproval.State.FAILED
    assert "the stories changed since they were shown to you" in approval.result
    task.refresh_from_db()
    assert task.is_pending and set(task.requirement.stories.values_list("state", flat=True)) == {"draft"}
