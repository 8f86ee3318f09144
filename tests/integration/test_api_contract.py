"""The REST contract on PostgreSQL, error cases included: 400 with field errors, 401, 403, 404, 409."""
import pytest

from lifecycle.models import Requirement
from tests.conftest import api_for
from tests.flows import SAMPLE
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/api/v1/requirements/"


@pytest.fixture
def story_task(worker, alice):
    pk = api_for(alice).post(URL, {"brief": SAMPLE}, format="json").data["id"]
    wait_for(lambda: Requirement.objects.get(pk=pk).state == "user_stories_created", what="stories")
    return Requirement.objects.get(pk=pk).review_tasks.get()


def decision_url(task) -> str:
    return f"/api/v1/review-tasks/{task.pk}/decision/"


@pytest.mark.parametrize("body,field", [
    ({}, "brief"),
    ({"brief": ""}, "brief"),
    ({"brief": "   "}, "brief"),
    ({"brief": "x" * 20_001}, "brief"),
    ({"brief": 42}, "brief"),
    ({"brief": ["a list"]}, "brief"),
    ({"brief": "ok", "title": 7}, "title"),
    ({"brief": "ok", "title": "t" * 201}, "title"),
    ({"brief": "ok", "project": "not-a-uuid"}, "project"),
    ({"brief": "ok", "priority": "high"}, "priority"),
    ({"brief": "ok", "playbook": "hotfix"}, "playbook"),
    ({"brief": "ok", "playbook": 3}, "playbook"),
])
def test_bad_briefs_get_400_with_the_field_named(alice, body, field):
    response = api_for(alice).post(URL, body, format="json")
    assert response.status_code == 400 and field in response.data, response.data
    assert not Requirement.objects.exists()


def test_a_brief_of_exactly_the_limit_is_accepted(alice, worker):
    response = api_for(alice).post(URL, {"brief": "x" * 20_000}, format="json")
    assert response.status_code == 201 and response.data["state"] == "received"


def test_a_brief_is_taken_in_a_bounded_number_of_queries_and_answered_with_its_location(
        alice, django_assert_max_num_queries):
    client = api_for(alice)
    client.post(URL, {"brief": "warm the prompt bundle"}, format="json")
    with django_assert_max_num_queries(12):  # auth, project, role; one transaction: bundle, 4 inserts (+ savepoint)
        response = client.post(URL, {"brief": SAMPLE, "title": "Reading list"}, format="json")
    assert response.status_code == 201 and response["Location"] == f"{URL}{response.data['id']}/"
    assert (response.data["brief"], response.data["title"], response.data["state"]) == (SAMPLE, "Reading list",
                                                                                         "received")


def test_a_project_of_another_organization_cannot_be_named(alice, oscar):
    globex_project = oscar.memberships.get().organization.projects.get()
    response = api_for(alice).post(URL, {"brief": "ok", "project": str(globex_project.pk)}, format="json")
    assert response.status_code == 400 and "project" in response.data


def test_a_reviewer_without_submitter_role_may_not_submit(rita):
    assert api_for(rita).post(URL, {"brief": "ok"}, format="json").status_code == 403


def test_unauthenticated_requests_get_401(story_task):
    anonymous = api_for(None)
    assert anonymous.get(URL).status_code == 401
    assert anonymous.post(URL, {"brief": "ok"}, format="json").status_code == 401
    assert anonymous.post(decision_url(story_task), {"decision": "approve"}, format="json").status_code == 401


def test_other_organizations_objects_are_invisible(story_task, oscar):
    outsider = api_for(oscar)
    assert outsider.get(URL).data["results"] == []
    assert outsider.get(f"{URL}{story_task.requirement_id}/").status_code == 404
    assert outsider.get("/api/v1/review-tasks/").data["results"] == []
    assert outsider.post(decision_url(story_task), {"decision": "approve"}, format="json").status_code == 404
    story_task.refresh_from_db()
    assert story_task.state == "open"


def test_missing_and_malformed_ids_are_404(alice):
    client = api_for(alice)
    assert client.get(f"{URL}00000000-0000-0000-0000-000000000000/").status_code == 404
    assert client.get(f"{URL}not-a-uuid/").status_code == 404
    assert client.post("/api/v1/review-tasks/not-a-uuid/decision/", {"decision": "approve"}, format="json").status_code == 404


@pytest.mark.parametrize("body,field", [
    ({}, "decision"),
    ({"decision": "maybe"}, "decision"),
    ({"decision": "reject"}, "reason"),
    ({"decision": "request_changes"}, "feedback"),
    ({"decision": "answer", "answer": "x"}, "decision"),
    ({"decision": "approve", "reason": 5}, "reason"),
    ({"decision": "approve", "extra": True}, "extra"),
])
def test_bad_decisions_get_400_with_the_field_named(story_task, rita, body, field):
    response = api_for(rita).post(decision_url(story_task), body, format="json")
    assert response.status_code == 400 and field in response.data, response.data
    story_task.refresh_from_db()
    assert story_task.state == "open"


def test_a_member_without_the_reviewer_role_gets_403(story_task, sam):
    response = api_for(sam).post(decision_url(story_task), {"decision": "approve"}, format="json")
    assert response.status_code == 403 and "reviewer role" in response.data["detail"]


def test_deciding_a_resolved_task_is_409(story_task, rita):
    client = api_for(rita)
    version = client.get(f"/api/v1/review-tasks/{story_task.pk}/").data["stories_version"]
    assert client.post(decision_url(story_task), {"decision": "approve", "stories_version": version},
                       format="json").status_code == 200
    again = client.post(decision_url(story_task), {"decision": "reject", "reason": "late"}, format="json")
    assert again.status_code == 409 and again.data["code"] == "illegal_transition"


def test_review_tasks_filter_by_state(story_task, rita):
    client = api_for(rita)
    assert len(client.get("/api/v1/review-tasks/?state=open").data["results"]) == 1
    assert client.get("/api/v1/review-tasks/?state=resolved").data["results"] == []
    assert client.get("/api/v1/review-tasks/?state=nonsense").status_code == 400


def test_a_page_is_at_most_200_rows_however_large_the_limit_asked(alice):
    client = api_for(alice)
    for _ in range(2):
        assert client.post(URL, {"brief": "a brief"}, format="json").status_code == 201
    for limit in ("99999999999999999999", "9223372036854775807", "1000000"):  # past bigint, bigint's max, large
        response = client.get(f"{URL}?limit={limit}&offset=1")
        assert response.status_code == 200 and len(response.data["results"]) == 1
        assert "limit=200" in (response.data["previous"] or "")  # the page's own links say the limit it used
    for query in ("limit=x", "limit=0", "offset=null", "offset=-1"):  # what the schema says is not a page: a 400
        assert client.get(f"{URL}?{query}").status_code == 400


def test_the_openapi_schema_describes_the_api(alice):
    response = api_for(alice).get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"] if hasattr(response, "json") else response.data["paths"]
    assert "/api/v1/requirements/" in paths and "/api/v1/review-tasks/{id}/decision/" in paths
