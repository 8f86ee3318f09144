"""The GitHub client's drafts, idempotent opening and issue comments against the fake GitHub over real HTTP."""
from __future__ import annotations

import logging

import pytest

from agents.delivery.api import HostError, NotFound, RequestRefused, TokenRefused
from agents.delivery.errors import NoAnswer
from agents.delivery.github import GitHubClient
from tests.fakes.github_server import FakeGitHubServer

TOKEN = "ghp_fakeTOKEN0123456789abcdef"
REPO, BRANCH = "acme/shop", "aiteam/12-fix-total"


@pytest.fixture
def github():
    with FakeGitHubServer(TOKEN) as fake:
        fake.add_issue(REPO, 12)
        yield fake


@pytest.fixture
def client(github):
    with GitHubClient(TOKEN, api_url=github.url, timeout_s=5) as client:
        yield client


def test_a_draft_pull_request_is_asked_for_with_githubs_draft_field(github, client):
    change = client.ensure_pull(REPO, BRANCH, "main", "Fix the total", "Fixes #12", draft=True)

    assert (change.number, change.draft, change.reused) == (1, True, False)
    assert github.requests[-1].body == {"head": BRANCH, "base": "main", "title": "Fix the total", "body": "Fixes #12",
                                        "draft": True}


def test_a_ready_pull_request_sends_no_draft_field(github, client):
    change = client.ensure_pull(REPO, BRANCH, "main", "Fix", "")

    assert not change.draft and "draft" not in github.requests[-1].body


def test_asking_again_returns_the_open_pull_request_instead_of_a_second(github, client):
    first = client.ensure_pull(REPO, BRANCH, "main", "Fix", "")
    again = client.ensure_pull(REPO, BRANCH, "main", "Fix", "")

    assert again.reused and again.number == first.number and github.creations == 1
    assert github.requests[-1].method == "GET" and "head=acme%3Aaiteam%2F12-fix-total&state=open" in github.requests[-1].path


def test_a_pull_request_opened_between_the_lookup_and_the_post_is_returned_not_duplicated(github, client, monkeypatch):
    theirs = client.open_pull(REPO, BRANCH, "main", "Theirs", "")
    real_find, calls = GitHubClient.find_open_pull, []

    def missed_the_first_time(self, repo, head):
        calls.append(head)
        return None if len(calls) == 1 else real_find(self, repo, head)

    monkeypatch.setattr(GitHubClient, "find_open_pull", missed_the_first_time)
    change = client.ensure_pull(REPO, BRANCH, "main", "Ours", "")

    assert change.reused and change.number == theirs["number"] and github.creations == 1 and len(calls) == 2


def test_a_comment_on_the_issue_is_posted_and_its_address_returned(github, client):
    comment = client.comment_on_issue(REPO, 12, "Started.")

    assert comment["html_url"].endswith("/acme/shop/issues/12#issuecomment-1")
    assert github.requests[-1].path == "/repos/acme/shop/issues/12/comments" and github.comments[-1]["body"] == "Started."


def test_refusals_are_mapped_to_their_kind_with_githubs_words(github, client):
    with pytest.raises(NotFound, match=r"GitHub POST /repos/acme/shop/issues/99/comments: 404 Not Found \(no such"):
        client.comment_on_issue(REPO, 99, "x")
    with pytest.raises(RequestRefused, match="422 Validation Failed; IssueComment body missing_field"):
        client.comment_on_issue(REPO, 12, "")
    with pytest.raises(RequestRefused, match="body is too long"):
        client.open_pull(REPO, BRANCH, "main", "Fix", "x" * 70_000)
    with GitHubClient("ghp_wrong", api_url=github.url, timeout_s=5) as wrong, pytest.raises(TokenRefused) as caught:
        wrong.comment_on_issue(REPO, 12, "x")
    assert caught.value.status == 401 and "Bad credentials" in str(caught.value) and not caught.value.retryable


def test_a_title_is_bounded_to_what_github_takes_as_github_refuses_a_longer_one(github, client):
    """On opening and on update, a title over GitHub's 256 characters is cut to 256 (the fake, like GitHub, 422s)."""
    long = "Fix " + "y" * 400
    opened = client.open_pull(REPO, BRANCH, "main", long, "")
    assert len(opened["title"]) == 256 and opened["title"].endswith("y…")
    client.update_pull(REPO, opened["number"], "z" * 300, "")
    assert github.pulls[1]["title"] == "z" * 255 + "…"
    client.update_pull(REPO, opened["number"], "w" * 256, "")
    assert github.pulls[1]["title"] == "w" * 256  # at the limit: kept whole (a person's title put back as it was)
    with pytest.raises(RequestRefused, match=r"422 Validation Failed; title is too long \(maximum is 256"):
        client._api.request("POST", f"/repos/{REPO}/pulls", json={"head": "b", "base": "main", "title": "t" * 257})


def test_a_server_error_is_retryable_and_a_late_answer_is_no_answer(github):
    github.fail_next_create(502, "Server Error")
    with GitHubClient(TOKEN, api_url=github.url, timeout_s=0.3) as client:
        with pytest.raises(HostError) as failed:
            client.open_pull(REPO, BRANCH, "main", "Fix", "")
        github.stall_next_create_reply(2.0)
        with pytest.raises(NoAnswer, match="ReadTimeout"):
            client.open_pull(REPO, BRANCH, "main", "Fix", "")

    assert failed.value.status == 502 and failed.value.retryable


def test_the_token_never_reaches_an_error_or_a_log(github, client, caplog):
    caplog.set_level(logging.DEBUG)
    github.fail_next_create(422, f"token {TOKEN} is not allowed here")
    with pytest.raises(RequestRefused) as caught:
        client.open_pull(REPO, BRANCH, "main", "Fix", "")

    assert "token *** is not allowed here" in str(caught.value)
    assert TOKEN not in str(caught.value) + caplog.text + repr(client)
    assert all(TOKEN not in r.path for r in github.requests)
