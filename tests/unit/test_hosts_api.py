"""The rule for host API URLs (https, or http to loopback; on the operator's list) and the shared JSON client's
handling of answers that are not what a host normally says."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from agents.delivery.api import (
    ApiUrlRefused,
    HostError,
    JsonApi,
    RateLimited,
    TokenRefused,
    api_url_problem,
    checked_api_url,
)
from agents.delivery.gitlab import GitLabClient
from tests.fakes.json_api import RecordedRequest, json_handler_for
from tests.fakes.local_server import LocalServer

TOKEN = "tok-fakeTOKEN0123456789"


class ScriptedHost(LocalServer):
    """Answers every request with the next (status, body[, headers]) a test queued."""

    def __init__(self) -> None:
        self.answers: list[tuple[Any, ...]] = []
        self.requests: list[RecordedRequest] = []
        super().__init__(json_handler_for(self), "scripted-host")

    def handle(self, request: RecordedRequest) -> tuple[Any, ...]:
        self.requests.append(request)
        return self.answers.pop(0)

    def reply_delay(self, request: RecordedRequest) -> float:
        return 0.0


@pytest.mark.parametrize(("url", "problem"), [
    ("https://gitlab.com", None),
    ("https://ghe.acme.example/api/v3", None),
    ("http://127.0.0.1:8080", None),
    ("http://[::1]:8080", None),
    ("http://localhost:8080", None),
    ("http://gitlab.internal", "is not https://"),
    ("http://10.0.0.5", "is not https://"),
    ("ftp://gitlab.com", "is not https://"),
    ("https://user:pass@gitlab.com", "carries credentials"),
    ("https://gitlab.com/?private_token=x", "carries credentials, a query or a fragment"),
    ("https://", "names no host"),
    ("https://gitlab.com:notaport", "is not a well-formed URL"),
])
def test_an_api_url_is_https_or_loopback_http_without_credentials(url, problem):
    found = api_url_problem(url)
    assert found == problem if problem is None else problem in found


def test_an_api_url_must_also_be_on_the_operators_list():
    allowed = ["https://gitlab.com/", "https://gitlab.acme.example"]
    assert checked_api_url("https://gitlab.com", allowed, "AITEAM_GITLAB_URLS") == "https://gitlab.com"
    assert checked_api_url("https://gitlab.acme.example/", allowed, "AITEAM_GITLAB_URLS") == "https://gitlab.acme.example"
    with pytest.raises(ApiUrlRefused, match="'https://gitlab.evil.example' is not one of the operator's AITEAM_GITLAB_URLS"):
        checked_api_url("https://gitlab.evil.example", allowed, "AITEAM_GITLAB_URLS")
    with pytest.raises(ApiUrlRefused, match="is not https://"):
        checked_api_url("http://gitlab.com", ["http://gitlab.com"], "AITEAM_GITLAB_URLS")


def test_a_client_refuses_a_plain_http_api_url_before_sending_its_token():
    with pytest.raises(ApiUrlRefused, match="the GitLab API URL 'http://gitlab.internal/api/v4' is not https://"):
        GitLabClient(TOKEN, url="http://gitlab.internal")


@pytest.mark.parametrize(("env", "error"), [
    ({"AITEAM_GITLAB_URLS": "https://gitlab.com,http://gitlab.internal"}, "AITEAM_GITLAB_URLS: 'http://gitlab.internal'"),
    ({"AITEAM_JIRA_URLS": "https://u:p@acme.atlassian.net"}, "AITEAM_JIRA_URLS: 'https://u:p@acme.atlassian.net' carries"),
    ({"AITEAM_GITHUB_API_URLS": "http://api.github.com"}, "AITEAM_GITHUB_API_URLS: 'http://api.github.com' is not"),
    ({"AITEAM_JIRA_URLS": "https://acme.atlassian.net/, http://127.0.0.1:9"}, None),
])
def test_the_settings_refuse_to_start_with_an_api_url_off_the_rule(env, error):
    base = {k: v for k, v in os.environ.items() if not k.endswith(("_API_URLS", "_URLS"))}
    code = "import django; django.setup(); from django.conf import settings; print(settings.AITEAM_JIRA_URLS)"
    run = subprocess.run([sys.executable, "-c", code], env={**base, **env, "DJANGO_SETTINGS_MODULE": "aiteam.settings"},
                         capture_output=True, text=True, timeout=60)
    if error is None:
        assert run.returncode == 0 and run.stdout.strip() == "['https://acme.atlassian.net', 'http://127.0.0.1:9']"
    else:
        assert run.returncode != 0 and error in run.stderr


def test_a_redirect_is_an_error_and_is_not_followed_with_the_token():
    with ScriptedHost() as host, JsonApi("GitLab", host.url, {"PRIVATE-TOKEN": TOKEN}, secrets=[TOKEN], timeout_s=5) as api:
        host.answers.append((302, {"message": "moved"}))
        with pytest.raises(HostError, match="GitLab GET /x: 302 moved") as caught:
            api.request("GET", "/x")
    assert len(host.requests) == 1 and not caught.value.retryable


def test_an_error_body_that_is_not_json_or_is_huge_is_bounded_and_scrubbed():
    with ScriptedHost() as host, JsonApi("Jira", host.url, {}, secrets=[TOKEN], timeout_s=5) as api:
        host.answers.append((503, f"<html>{TOKEN} ".encode() + b"x" * 10_000 + b"</html>"))
        with pytest.raises(HostError) as caught:
            api.request("POST", "/issue/PROJ-1/comment", json={"body": {}})
    message = str(caught.value)
    assert message.startswith("Jira POST /issue/PROJ-1/comment: 503 <html>*** xxx") and caught.value.retryable
    assert len(message) < 400 and TOKEN not in message


def test_a_success_without_json_is_a_clear_error():
    with ScriptedHost() as host, JsonApi("GitHub", host.url, {}, secrets=[], timeout_s=5) as api:
        host.answers.append((200, b"<html>a captive portal</html>"))
        with pytest.raises(HostError, match="GitHub GET /pulls: 200 with a body that is not JSON"):
            api.request("GET", "/pulls")


def test_a_timeout_of_zero_is_refused():
    with pytest.raises(ValueError, match="timeout_s must be above 0"):
        JsonApi("GitHub", "https://api.github.com", {}, secrets=[], timeout_s=0)


def test_rate_limits_are_retryable_and_a_plain_403_is_not():
    with ScriptedHost() as host, JsonApi("GitHub", host.url, {}, secrets=[], timeout_s=5) as api:
        host.answers += [(403, {"message": "You have exceeded a secondary rate limit"}, {"retry-after": "60"}),
                         (403, {"message": "API rate limit exceeded"}, {"x-ratelimit-remaining": "0"}),
                         (429, {"message": "Too Many Requests"}),
                         (403, {"message": "Resource not accessible by integration"}, {"x-ratelimit-remaining": "4999"})]
        errors = []
        for _ in range(4):
            with pytest.raises(HostError) as caught:
                api.request("POST", "/repos/acme/shop/pulls", json={})
            errors.append(caught.value)

    assert [type(e) for e in errors] == [RateLimited, RateLimited, RateLimited, TokenRefused]
    assert [e.retryable for e in errors] == [True, True, True, False]
    assert "403 You have exceeded a secondary rate limit (rate limited; retry after 60s)" in str(errors[0])
    assert str(errors[1]).endswith("403 API rate limit exceeded (rate limited; retry later)")
