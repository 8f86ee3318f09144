"""The GitLab client against a fake of GitLab's API v4 over real HTTP on localhost."""
from __future__ import annotations

import logging
import time

import pytest

from agents.delivery.api import NotFound, RequestRefused, TokenRefused
from agents.delivery.errors import DeliveryError, NoAnswer
from agents.delivery.gitlab import GitLabClient, draft_title
from agents.delivery.pr_body import TicketRef, change_title
from tests.fakes.gitlab_server import FakeGitLabServer

TOKEN = "glpat-fakeTOKEN0123456789"
PROJECT = "acme/tools/shop"  # a subgroup: two slashes to encode
BRANCH = "aiteam/12-fix-total"


@pytest.fixture
def gitlab():
    with FakeGitLabServer(TOKEN) as fake:
        fake.add_project(PROJECT, issues=(12,))
        yield fake


@pytest.fixture
def client(gitlab):
    with GitLabClient(TOKEN, url=gitlab.url, timeout_s=5) as client:
        yield client


def test_it_opens_a_draft_merge_request_on_the_url_encoded_project_with_the_token_in_its_header(gitlab, client):
    change = client.ensure_merge_request(PROJECT, BRANCH, "main", "Fix the total", "Closes #12")

    assert (change.number, change.draft, change.reused) == (1, True, False)
    assert change.url == "https://gitlab.example/acme/tools/shop/-/merge_requests/1"
    posted = gitlab.requests[-1]
    assert posted.path == "/api/v4/projects/acme%2Ftools%2Fshop/merge_requests"
    assert posted.headers["private-token"] == TOKEN and TOKEN not in posted.path
    assert posted.body == {"source_branch": BRANCH, "target_branch": "main", "title": "Draft: Fix the total",
                           "description": "Closes #12"}


def test_asking_again_returns_the_open_merge_request_instead_of_a_second(gitlab, client):
    first = client.ensure_merge_request(PROJECT, BRANCH, "main", "Fix", "")
    again = client.ensure_merge_request(PROJECT, BRANCH, "main", "Fix", "")

    assert again.reused and again.number == first.number
    assert len(gitlab.merge_requests) == 1
    assert gitlab.requests[-1].method == "GET" and "source_branch=aiteam%2F12-fix-total" in gitlab.requests[-1].path
    assert "state=opened" in gitlab.requests[-1].path


def test_a_merge_request_opened_between_the_lookup_and_the_post_is_returned_not_duplicated(gitlab, client, monkeypatch):
    theirs = client.open_merge_request(PROJECT, BRANCH, "main", "Theirs", "", draft=False)
    real_find, calls = GitLabClient.find_open_merge_request, []

    def missed_the_first_time(self, project, source):
        calls.append(source)
        return None if len(calls) == 1 else real_find(self, project, source)

    monkeypatch.setattr(GitLabClient, "find_open_merge_request", missed_the_first_time)
    change = client.ensure_merge_request(PROJECT, BRANCH, "main", "Ours", "")

    assert change.reused and change.number == theirs["iid"] and len(gitlab.merge_requests) == 1
    assert len(calls) == 2  # GitLab's 409 "Another open merge request already exists" sent it to look again


def test_a_ready_merge_request_keeps_its_title_and_a_draft_is_prefixed_once():
    assert draft_title("Fix", draft=False) == "Fix"
    assert draft_title("Draft: Fix", draft=True) == "Draft: Fix"
    assert draft_title("[Draft] Fix", draft=True) == "[Draft] Fix"


def test_a_merge_request_can_be_closed_and_then_a_new_one_opened(gitlab, client):
    first = client.ensure_merge_request(PROJECT, BRANCH, "main", "Fix", "", draft=False)
    closed = client.close_merge_request(PROJECT, first.number)
    second = client.ensure_merge_request(PROJECT, BRANCH, "main", "Fix", "", draft=False)

    assert closed["state"] == "closed" and not first.draft
    assert (second.number, second.reused) == (2, False)


def test_a_wrong_token_is_a_token_refused_error_that_does_not_quote_it(gitlab):
    with GitLabClient("glpat-wrong", url=gitlab.url, timeout_s=5) as client, pytest.raises(TokenRefused) as caught:
        client.find_open_merge_request(PROJECT, BRANCH)

    assert caught.value.status == 401 and not caught.value.retryable
    assert "401 401 Unauthorized (the token was refused" in str(caught.value) and "glpat-wrong" not in str(caught.value)


def test_an_unknown_project_and_an_unknown_issue_are_not_found(client):
    with pytest.raises(NotFound, match=r"GitLab GET /projects/acme%2Fother/merge_requests: 404 404 Project Not Found"):
        client.find_open_merge_request("acme/other", BRANCH)
    with pytest.raises(NotFound, match="404 Issue Not Found"):
        client.comment_on_issue(PROJECT, 99, "hello")


def test_a_refused_merge_request_names_gitlabs_reason(client):
    with pytest.raises(RequestRefused) as same:
        client.open_merge_request(PROJECT, "main", "main", "Fix", "")
    with pytest.raises(RequestRefused) as missing:
        client.open_merge_request(PROJECT, BRANCH, "main", "", "", draft=False)

    assert same.value.status == 422 and "You can't use same project/branch for source and target" in str(same.value)
    assert missing.value.status == 400 and "title is missing" in str(missing.value)


def test_a_project_name_that_is_not_a_path_is_refused_before_any_call(gitlab, client):
    for bad in ("acme", "acme/../admin", "acme/shop?x=1", "/acme/shop"):
        with pytest.raises(DeliveryError, match="not a GitLab project"):
            client.find_open_merge_request(bad, BRANCH)
    assert gitlab.requests == []


def test_a_note_on_the_issue_is_posted_with_its_body(gitlab, client):
    note = client.comment_on_issue(PROJECT, 12, "Started.")

    assert note["noteable_iid"] == 12 and gitlab.notes[-1]["body"] == "Started."
    assert gitlab.requests[-1].path == "/api/v4/projects/acme%2Ftools%2Fshop/issues/12/notes"


def test_a_host_that_answers_too_late_is_no_answer_within_the_timeout(gitlab):
    gitlab.stall_next_reply(2.0)
    started = time.monotonic()
    with GitLabClient(TOKEN, url=gitlab.url, timeout_s=0.3) as client, pytest.raises(NoAnswer) as caught:
        client.comment_on_issue(PROJECT, 12, "Started.")

    assert time.monotonic() - started < 1.5
    assert "GitLab POST /projects/acme%2Ftools%2Fshop/issues/12/notes: ReadTimeout" in str(caught.value)


def test_the_token_never_reaches_a_log_or_an_error_even_when_the_host_echoes_it(gitlab, client, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    errors = []
    monkeypatch.setattr(gitlab, "_note", lambda *a: (400, {"message": {"note": [f"token {TOKEN} is not welcome"]}}))
    for call in (lambda: client.comment_on_issue(PROJECT, 12, "x"), lambda: client.find_open_merge_request("a/b", "x")):
        with pytest.raises(DeliveryError) as caught:
            call()
        errors.append(str(caught.value))

    assert "note: token *** is not welcome" in errors[0] and "404" in errors[1]
    assert TOKEN not in "".join(errors) + caplog.text + repr(client)


def test_a_draft_title_is_bounded_to_what_gitlab_takes_as_gitlab_refuses_a_longer_one(gitlab, client):
    """change_title cuts at 250 and `Draft: ` adds 7: the whole is cut to GitLab's 255, on opening and on update."""
    long = change_title(TicketRef(source="jira", key="A" * 50 + "-1234567890", title="y" * 200), "fallback")
    assert len(draft_title(long, True)) == 255 and draft_title(long, True).endswith("y…")
    opened = client.open_merge_request(PROJECT, BRANCH, "main", long, "")
    client.update_merge_request(PROJECT, opened["iid"], "z" * 300, "", draft=True)
    assert len(gitlab.merge_requests[0]["title"]) == 255 and gitlab.merge_requests[0]["draft"]
    with pytest.raises(RequestRefused, match="title: is too long"):
        client._api.request("POST", "/projects/acme%2Ftools%2Fshop/merge_requests",
                            json={"source_branch": "b", "target_branch": "main", "title": "t" * 256})
