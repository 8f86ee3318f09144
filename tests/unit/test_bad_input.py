"""Bad input is a 400 with a JSON error, never a 500: NUL bytes anywhere in a request (PostgreSQL text cannot hold
them: a lookup with one was a DataError) and JSON nested past AITEAM_JSON_MAX_DEPTH (a RecursionError)."""
import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from lifecycle.models import Requirement
from tests.conftest import api_for
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db
URL = "/api/v1/requirements/"


def nested(depth: int, leaf: object = 1) -> object:
    for _ in range(depth):
        leaf = {"k": leaf}
    return leaf


def assert_refused(response, words: str) -> None:
    assert response.status_code == 400, (response.status_code, response.content[:200])
    assert response["Content-Type"].startswith("application/json")
    assert words in json.dumps(response.json()), response.json()


def test_a_token_with_a_nul_byte_is_refused_before_it_is_looked_up():
    anonymous = APIClient()
    assert_refused(anonymous.get(URL, HTTP_AUTHORIZATION="Token abc\x00def"), "NUL")
    assert_refused(anonymous.post(URL, {"brief": "ok"}, format="json", HTTP_AUTHORIZATION="Token abc\x00def"), "NUL")


@pytest.mark.parametrize("where", ["header", "query", "path"])
def test_a_nul_byte_in_a_header_query_or_path_is_refused(alice, where):
    client = api_for(alice)
    if where == "header":
        response = client.get(URL, HTTP_X_FORWARDED_FOR="10.0.0.1\x00")
    elif where == "query":
        response = client.get("/api/v1/review-tasks/", {"state": "op\x00en"})
    else:
        response = client.get(f"{URL}%00/")
    assert_refused(response, "NUL")


def test_a_nul_byte_in_a_json_string_is_refused_and_nothing_is_made(alice):
    body = '{"brief": "read \\u0000 more", "title": "t"}'
    assert_refused(api_for(alice).post(URL, body, content_type="application/json"), "NUL")
    key_too = '{"brief": "ok", "\\u0000": 1}'
    assert_refused(api_for(alice).post(URL, key_too, content_type="application/json"), "NUL")
    assert not Requirement.objects.exists()


def test_a_nul_byte_in_the_admin_login_form_is_refused():
    response = Client().post("/admin/login/", {"username": "ad\x00min", "password": "x"})
    assert_refused(response, "NUL")


def test_a_brief_nested_a_thousand_deep_is_refused(alice):
    body = '{"brief": ' + "[" * 1000 + "]" * 1000 + "}"
    assert_refused(api_for(alice).post(URL, body, content_type="application/json"), "nested deeper than 32")
    assert not Requirement.objects.exists()


def test_a_budget_nested_a_thousand_deep_is_refused(acme_project, rita):
    task = open_review(acme_project, kind="budget_exhausted", stories=0)
    body = json.dumps({"decision": "override_budget", "budget": nested(900)})
    response = api_for(rita).post(f"/api/v1/review-tasks/{task.pk}/decision/", body, content_type="application/json")
    assert_refused(response, "nested deeper than 32")
    task.refresh_from_db()
    assert task.decision == ""


def test_the_depth_is_a_setting_and_a_body_within_it_reaches_validation(alice, settings):
    settings.AITEAM_JSON_MAX_DEPTH = 3
    within = api_for(alice).post(URL, {"brief": "ok", "title": {"a": [1]}}, format="json")  # depth 3
    assert_refused(within, "title")
    assert "nested" not in json.dumps(within.json())
    assert_refused(api_for(alice).post(URL, {"brief": "ok", "title": {"a": [[1]]}}, format="json"), "deeper than 3")


# --- what Django answers itself (no API view took the request, or it could not read the body): JSON under /api/

@pytest.mark.parametrize(("send", "status", "words"), [
    (lambda c: c.get("/api/v1/requirement/"), 404, "Not found"),  # a mistyped resource
    (lambda c: c.post(f"{URL}1.5/cancel/", {"reason": "r"}, format="json"), 404, "Not found"),  # no route takes the id
    (lambda c: c.get("/api/"), 404, "Not found"),
    (lambda c: c.post(URL, json.dumps({"brief": "x" * 5000}), content_type="application/json"), 413,
     "larger than the 4096 bytes DATA_UPLOAD_MAX_MEMORY_SIZE allows"),
    (lambda c: c.post(URL, "brief=" + "x" * 5000, content_type="application/x-www-form-urlencoded"), 413, "larger"),
    (lambda c: c.post(URL, b"garbage", content_type="multipart/form-data"), 400, "boundary is missing"),
], ids=["mistyped path", "dotted id", "api root", "big json", "big form", "multipart without boundary"])
def test_an_error_django_answers_under_the_api_is_json(alice, settings, send, status, words):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    response = send(api_for(alice))
    assert response.status_code == status, (response.status_code, response.content[:200])
    assert response["Content-Type"] == "application/json" and words in response.json()["detail"]
    assert not Requirement.objects.exists()


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize(("method", "path"), [
    ("post", URL.rstrip("/")), ("post", "/api/v1/review-tasks/{task}/decision"), ("patch", "/api/v1/projects/{project}"),
    ("put", "/api/v1/projects/{project}"), ("delete", "/api/v1/projects/{project}"),
    ("post", "/webhooks/github/{project}"), ("post", "/webhooks/slack/events")])
def test_a_write_to_an_api_path_without_its_slash_is_a_json_404_naming_the_path_with_it(alice, acme_project, settings,
                                                                                         debug, method, path):
    """Django would answer 301 (a client follows it with a GET and loses the body) or, with DEBUG, raise."""
    settings.DEBUG = debug
    path = path.format(task=open_review(acme_project).pk, project=acme_project.pk)
    response = getattr(api_for(alice), method)(path, {"brief": "Fix the total", "decision": "approve"}, format="json")

    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert response.json() == {"detail": f"Not found. These paths end with a slash: {method.upper()} {path}/",
                               "code": "no_trailing_slash"}
    assert not Requirement.objects.filter(brief="Fix the total").exists()


def test_a_read_of_an_api_path_without_its_slash_is_still_redirected_and_other_paths_keep_djangos_answer(alice):
    assert api_for(alice).get(URL.rstrip("/") + "?limit=1")["Location"] == URL + "?limit=1"
    assert api_for(alice).post("/api/v1/nothing", {}, format="json").json() == {"detail": "Not found."}
    assert Client().post("/staff/dashboard", {}).status_code == 301  # outside /api/: Django's redirect, as before


def test_pages_outside_the_api_keep_djangos_html_errors(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    missing = Client().get("/staff/nope/")
    too_big = Client().post("/admin/login/", {"username": "x" * 5000, "password": "x"})
    assert (missing.status_code, too_big.status_code) == (404, 400)
    assert missing["Content-Type"].startswith("text/html") and too_big["Content-Type"].startswith("text/html")


def test_a_server_error_under_the_api_is_json_too(alice, monkeypatch):
    def broken(**_):
        raise RuntimeError("a bug")

    monkeypatch.setattr("lifecycle.api.views.requirement_submit_once", broken)
    client = api_for(alice)
    client.raise_request_exception = False  # answer as a server would, not re-raise in the test
    response = client.post(URL, {"brief": "b"}, format="json")
    assert (response.status_code, response["Content-Type"]) == (500, "application/json")
    assert response.json() == {"detail": "A server error occurred."} and "a bug" not in response.content.decode()
