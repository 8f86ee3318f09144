"""Ticket comments on GitHub, GitLab and Jira: posted through each fake over real HTTP, never failing the caller.

Also the Jira client itself (its only call is a comment): basic auth with e-mail and API token, an ADF body.
"""
from __future__ import annotations

import base64
import json
import logging

import pytest

from agents.delivery.api import ChangeRequest, NotFound, RequestRefused, TokenRefused
from agents.delivery.comments import change_opened, post_comment, started, stopped
from agents.delivery.errors import DeliveryError
from agents.delivery.github import GitHubSettings
from agents.delivery.gitlab import GitLabSettings
from agents.delivery.jira import JiraClient, JiraSettings
from agents.delivery.rich_text import to_adf
from tests.fakes.github_server import FakeGitHubServer
from tests.fakes.gitlab_server import FakeGitLabServer
from tests.fakes.jira_server import FakeJiraServer, adf_problem, plain_text

TOKEN, EMAIL = "tok-fakeTOKEN0123456789", "bot@acme.example"
REASON = "Tests failed: tests/test_cart.py::test_total\n/close\n@alice see <!-- hidden --> [here](http://evil)"


@pytest.fixture
def github():
    with FakeGitHubServer(TOKEN) as fake:
        fake.add_issue("acme/shop", 12)
        yield fake


@pytest.fixture
def gitlab():
    with FakeGitLabServer(TOKEN) as fake:
        fake.add_project("acme/shop", issues=(12,))
        yield fake


@pytest.fixture
def jira():
    with FakeJiraServer(EMAIL, TOKEN) as fake:
        fake.add_issue("PROJ-7")
        yield fake


def jira_settings(jira: FakeJiraServer, token: str = TOKEN, timeout_s: float = 5) -> JiraSettings:
    return JiraSettings(site_url=jira.url, email=EMAIL, token=token, timeout_s=timeout_s)


def test_the_jira_client_posts_an_adf_comment_with_basic_auth(jira):
    with JiraClient(EMAIL, TOKEN, site_url=jira.url, timeout_s=5) as client:
        comment = client.add_comment("PROJ-7", to_adf(started(7, "aiteam/PROJ-7-fix")))

    request = jira.requests[-1]
    assert request.path == "/rest/api/3/issue/PROJ-7/comment" and comment["issue"] == "PROJ-7"
    assert request.headers["authorization"] == "Basic " + base64.b64encode(f"{EMAIL}:{TOKEN}".encode()).decode()
    assert adf_problem(request.body["body"]) is None
    assert plain_text(request.body["body"]).startswith("aiteam started work on this ticket (requirement 7)")


def test_the_jira_client_maps_refusals_and_checks_the_key_before_any_call(jira):
    with JiraClient(EMAIL, TOKEN, site_url=jira.url, timeout_s=5) as client:
        with pytest.raises(NotFound, match="Issue does not exist or you do not have permission to see it"):
            client.add_comment("PROJ-99", to_adf(started(7, "b")))
        with pytest.raises(RequestRefused, match="400 comment: Comment body is not valid: not a doc of version 1"):
            client.add_comment("PROJ-7", {"type": "doc", "content": "plain text"})
        with pytest.raises(DeliveryError, match="not a Jira issue key"):
            client.add_comment("PROJ-7/../../admin", to_adf(started(7, "b")))
    with JiraClient(EMAIL, "wrong", site_url=jira.url, timeout_s=5) as wrong, pytest.raises(TokenRefused):
        wrong.add_comment("PROJ-7", to_adf(started(7, "b")))
    assert [r.path for r in jira.requests] == ["/rest/api/3/issue/PROJ-99/comment"] + ["/rest/api/3/issue/PROJ-7/comment"] * 2


def test_each_host_gets_the_three_comments_in_its_own_format(github, gitlab, jira):
    change = ChangeRequest(number=3, url="https://git.example/acme/shop/pull/3", draft=True, reused=False)
    hosts = [(GitHubSettings(repository="acme/shop", token=TOKEN, api_url=github.url, timeout_s=5), "#12"),
             (GitLabSettings(project="acme/shop", token=TOKEN, url=gitlab.url, timeout_s=5), "#12"),
             (jira_settings(jira), "PROJ-7")]
    for settings, key in hosts:
        results = [post_comment(settings, key, parts) for parts in (started(7, "aiteam/x"), change_opened(change),
                                                                     stopped(REASON))]
        assert [r.ok for r in results] == [True, True, True], results

    assert github.comments[1]["body"] == "The draft pull request [#3](https://git.example/acme/shop/pull/3) is open for review.\n"
    assert gitlab.notes[0]["body"].startswith("aiteam started work on this ticket (requirement 7), on branch `aiteam/x`.")
    link = jira.comments[1]["body"]["content"][0]["content"][1]
    assert link == {"type": "text", "text": "#3", "marks": [{"type": "link", "attrs": {"href": change.url}}]}


def test_the_reason_is_shown_literally_so_it_pings_nobody_and_runs_no_quick_action(github, gitlab, jira):
    post_comment(GitHubSettings(repository="acme/shop", token=TOKEN, api_url=github.url, timeout_s=5), "#12", stopped(REASON))
    post_comment(GitLabSettings(project="acme/shop", token=TOKEN, url=gitlab.url, timeout_s=5), "#12", stopped(REASON))
    post_comment(jira_settings(jira), "PROJ-7", stopped(REASON))

    for body in (github.comments[0]["body"], gitlab.notes[0]["body"]):
        fenced = body.split("```text\n")[1].split("\n```")[0]
        assert fenced.splitlines() == ["Tests failed: tests/test_cart.py::test_total", " /close",
                                       "@alice see <!-- hidden --> [here](http://evil)"]
        assert not any(line.startswith("/") for line in body.splitlines())
    nodes = jira.comments[0]["body"]["content"][1]["content"]
    assert [n["type"] for n in nodes] == ["text", "hardBreak", "text", "hardBreak", "text"]
    assert all(n.get("marks") == [{"type": "code"}] for n in nodes if n["type"] == "text")


def test_a_comment_that_fails_returns_why_and_whether_to_retry_and_never_raises(github, gitlab, jira, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = post_comment(GitHubSettings(repository="acme/shop", token="ghp_wrongTOKEN42", api_url=github.url, timeout_s=5),
                         "#12", started(7, "b"))
    missing = post_comment(GitLabSettings(project="acme/shop", token=TOKEN, url=gitlab.url, timeout_s=5), "#99",
                           started(7, "b"))
    jira.stall_next_reply(2.0)
    late = post_comment(jira_settings(jira, timeout_s=0.3), "PROJ-7", started(7, "b"))
    bad_key = post_comment(jira_settings(jira), "not a key", started(7, "b"))
    unreachable = post_comment(GitLabSettings(project="acme/shop", token=TOKEN, url="http://127.0.0.1:9", timeout_s=2),
                               "#12", started(7, "b"))

    assert (wrong.ok, wrong.status, wrong.retryable) == (False, 401, False) and "Bad credentials" in wrong.error
    assert (missing.status, missing.retryable) == (404, False) and "404 Issue Not Found" in missing.error
    assert (late.ok, late.status, late.retryable) == (False, None, True) and "ReadTimeout" in late.error
    assert (bad_key.ok, bad_key.retryable) == (False, False) and "not a Jira issue key" in bad_key.error
    assert unreachable.retryable and "ConnectError" in unreachable.error
    assert "ticket comment on '#99' failed: GitLab POST" in caplog.text


def test_a_busy_host_says_how_long_it_asked_to_wait_in_ascii_digits_only(github, gitlab, jira):
    github.busy_next(429, retry_after="120")
    gitlab.busy_next(503, retry_after="30")
    jira.busy_next(429, retry_after="\u00b2")  # a superscript two: a digit to str.isdigit, not to HTTP
    jira.busy_next(503, retry_after="Wed, 21 Oct 2015 07:28:00 GMT")  # the date form: no wait named
    on_github = post_comment(GitHubSettings(repository="acme/shop", token=TOKEN, api_url=github.url, timeout_s=5),
                             "#12", started(7, "b"))
    on_gitlab = post_comment(GitLabSettings(project="acme/shop", token=TOKEN, url=gitlab.url, timeout_s=5), "#12",
                             started(7, "b"))
    not_ascii, dated = (post_comment(jira_settings(jira), "PROJ-7", started(7, "b")) for _ in range(2))

    assert (on_github.status, on_github.retryable, on_github.retry_after_s) == (429, True, 120.0)
    assert "429 Too Many Requests (rate limited; retry after 120s)" in on_github.error
    assert (on_gitlab.status, on_gitlab.retryable, on_gitlab.retry_after_s) == (503, True, 30.0)
    assert "503 Service Unavailable (retry after 30s)" in on_gitlab.error
    assert (not_ascii.status, not_ascii.retryable, not_ascii.retry_after_s) == (429, True, None)
    assert (dated.status, dated.retryable, dated.retry_after_s) == (503, True, None)
    assert not github.comments and not gitlab.notes and not jira.comments
    assert post_comment(jira_settings(jira), "PROJ-7", started(7, "b")).ok  # no longer busy


def test_a_bug_inside_posting_is_a_failed_result_logged_without_the_token(github, jira, monkeypatch, caplog):
    credential = base64.b64encode(f"{EMAIL}:{TOKEN}".encode()).decode()

    def broken_github(*args, **kwargs):
        raise RuntimeError(f"boom with {TOKEN} and Bearer {TOKEN}")

    def broken_jira(*args, **kwargs):
        raise RuntimeError(f"boom with {TOKEN} and Basic {credential}")

    monkeypatch.setattr("agents.delivery.github.GitHubClient.comment_on_issue", broken_github)
    monkeypatch.setattr("agents.delivery.jira.JiraClient.add_comment", broken_jira)
    on_github = post_comment(GitHubSettings(repository="acme/shop", token=TOKEN, api_url=github.url, timeout_s=5), "#12",
                             started(7, "b"))
    on_jira = post_comment(jira_settings(jira), "PROJ-7", started(7, "b"))

    assert not on_github.ok and on_github.error == "unexpected RuntimeError: boom with *** and Bearer ***"
    assert not on_jira.ok and on_jira.error == "unexpected RuntimeError: boom with *** and Basic ***"
    assert "Traceback" in caplog.text and TOKEN not in caplog.text and credential not in caplog.text


def test_tokens_never_appear_in_results_logs_or_requests_urls(github, gitlab, jira, caplog):
    caplog.set_level(logging.DEBUG)
    credential = base64.b64encode(f"{EMAIL}:{TOKEN}".encode()).decode()
    jira.issues.clear()
    gitlab._note = lambda *a: (400, {"message": {"note": [f"echo {TOKEN}"]}})  # a host that echoes the token
    hosts = [(GitHubSettings(repository="acme/shop", token=TOKEN, api_url=github.url, timeout_s=5), "#12"),
             (GitLabSettings(project="acme/shop", token=TOKEN, url=gitlab.url, timeout_s=5), "#12"),
             (jira_settings(jira), "PROJ-7")]
    results = [post_comment(settings, key, started(7, "b")) for settings, key in hosts]
    stored = json.dumps([r.to_dict() for r in results]) + caplog.text
    stored += repr([GitHubSettings("a/b", TOKEN), GitLabSettings("a/b", TOKEN), jira_settings(jira)])

    assert results[1].error.endswith("note: echo ***") and not results[2].ok
    assert TOKEN not in stored and credential not in stored
    assert all(TOKEN not in r.path for fake in (github, gitlab, jira) for r in fake.requests)
