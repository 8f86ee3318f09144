"""The foundation end to end on PostgreSQL, Redis and a real Celery worker, driven over REST."""
import pytest

from lifecycle.models import Requirement
from tests.conftest import api_for
from tests.flows import SAMPLE
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _state(pk: str) -> str:
    return Requirement.objects.get(pk=pk).state


def test_a_brief_goes_from_rest_to_approved_stories(worker, alice, rita):
    created = api_for(alice).post("/api/v1/requirements/", {"brief": SAMPLE, "title": "Reading list"}, format="json")
    assert created.status_code == 201 and created.data["state"] == "received"
    pk = created.data["id"]
    wait_for(lambda: _state(pk) == "user_stories_created", what="PO and BA to run on the worker")

    detail = api_for(alice).get(f"/api/v1/requirements/{pk}/").data
    assert detail["requirement_doc"]["objectives"] and len(detail["stories"]) == 4
    assert [t["event"] for t in detail["transitions"]] == ["submit", "clarify", "create_stories"]
    assert detail["llm_usage"]["calls"] == 2 and detail["llm_usage"]["input_tokens"] > 0
    (task,) = detail["open_review_tasks"]
    assert task["kind"] == "stories_approval"

    inbox = api_for(rita).get("/api/v1/review-tasks/?state=open").data["results"]
    assert [t["id"] for t in inbox] == [task["id"]]
    decided = api_for(rita).post(f"/api/v1/review-tasks/{task['id']}/decision/", {
        "decision": "approve", "stories_version": task["stories_version"]}, format="json")
    assert decided.status_code == 200 and decided.data["decided_by"] == "rita"
    stories = api_for(alice).get(f"/api/v1/requirements/{pk}/").data["stories"]
    assert {s["state"] for s in stories} == {"approved"}


def test_rejected_stories_are_reworked_by_the_ba_on_the_worker(worker, alice, rita):
    pk = api_for(alice).post("/api/v1/requirements/", {"brief": SAMPLE}, format="json").data["id"]
    wait_for(lambda: _state(pk) == "user_stories_created", what="first stories")
    task = api_for(rita).get("/api/v1/review-tasks/?state=open").data["results"][0]
    answer = api_for(rita).post(f"/api/v1/review-tasks/{task['id']}/decision/",
                                {"decision": "reject", "reason": "Say what the listing prints"}, format="json")
    assert answer.status_code == 200
    wait_for(lambda: Requirement.objects.get(pk=pk).story_round == 2 and _state(pk) == "user_stories_created",
             what="second round of stories")
    rows = api_for(alice).get(f"/api/v1/requirements/{pk}/").data["transitions"]
    events = [t["event"] for t in rows if t["subject"] == "requirement"]
    assert events == ["submit", "clarify", "create_stories", "reject_stories", "create_stories"]

