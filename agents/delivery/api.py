"""The one JSON-over-HTTPS client under the host clients (GitHub, GitLab, Jira), and the rule for their API URLs.

Each host client builds its own headers (the token goes into one header, never into a URL) and calls
`JsonApi.request`. Every call has a timeout; a host's error answer becomes a `HostError` whose message is scrubbed
of the token, bounded, and says which kind of failure it is (token refused, not found, request refused), so a
caller can tell a person what to fix and a retry policy what to retry.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import urlsplit

import httpx

from agents.delivery.errors import DeliveryError, NoAnswer, scrub

MESSAGE_MAX_CHARS = 300  # of the host's own words in an error: enough to act on, too little to carry a page
_LOOPBACK_NAMES = {"localhost"}


@dataclass(frozen=True)
class ChangeRequest:
    """A pull request (GitHub) or merge request (GitLab) as delivery records it."""

    number: int  # GitHub's number, GitLab's iid: what people write after # or !
    url: str
    draft: bool
    reused: bool  # it was already open for the branch: an earlier run (or a person) opened it
    title: str = ""  # as the host holds it (GitLab's with its Draft: prefix)
    body: str = field(default="", repr=False)


class HostError(DeliveryError):
    """The host answered with an error. `status` is its HTTP status; `retryable` says whether asking again later
    may succeed (429 and 5xx), as opposed to a person having to change something first."""

    def __init__(self, message: str, *, status: int, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = status >= 500 or isinstance(self, RateLimited)
        self.retry_after_s = retry_after_s  # the host's Retry-After, when it said how long to wait


class RateLimited(HostError):
    """429, or GitHub's 403 with a Retry-After or no requests left (its primary and secondary rate limits)."""


class TokenRefused(HostError):
    """401/403: the token is wrong, expired, or lacks the scope (or role) the call needs."""


class NotFound(HostError):
    """404: no such repository, project or issue, or one the token may not see (hosts answer alike for both)."""


class RequestRefused(HostError):
    """400/409/422: the host understood the request and refused it (a missing field, a duplicate, a bad branch)."""


class ApiUrlRefused(DeliveryError):
    """The API URL breaks the operator's rule: a person changes the project's settings or the allow-list."""


def api_url_problem(url: str) -> str | None:
    """Why `url` may not be a host API's base URL at all, or None. https only (the token travels in a header); plain
    http only to this machine's loopback (the local fake host of the demo and the tests). No credentials, query or
    fragment: the URL is shown and logged."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        return "is not a well-formed URL"
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        return "carries credentials, a query or a fragment"
    host = (parts.hostname or "").lower()
    if not host:
        return "names no host"
    if parts.scheme == "https" or (parts.scheme == "http" and _is_loopback(host)):
        return None
    return "is not https:// (plain http:// is allowed only to 127.0.0.1, ::1 or localhost)"


def normalized_api_url(url: str) -> str:
    """An API URL as it is compared and used: without surrounding spaces or trailing slashes. The one form for the
    operator's lists (aiteam/settings.py), a project's settings when saved (repo_settings) and where they are used."""
    return url.strip().rstrip("/")


def api_url_list(raw: str) -> list[str]:
    """The operator's comma-separated list of API URLs, each normalized."""
    return [normalized_api_url(url) for url in raw.split(",") if url.strip()]


def url_list_problems(urls: Iterable[str]) -> list[str]:
    """Each entry of an operator's list of API URLs that breaks the rule, with why (for the settings' startup check)."""
    return [f"{url!r} {problem}" for url in urls if (problem := api_url_problem(url))]


def checked_api_url(url: str, allowed: Iterable[str], setting: str) -> str:
    """`url` without a trailing slash when it is well-formed and on the operator's list `setting`; else ApiUrlRefused.
    The list is read where the URL is used, since the operator may narrow it after a project was saved."""
    base = normalized_api_url(url)
    if problem := api_url_problem(base):
        raise ApiUrlRefused(f"the API URL {base!r} {problem}")
    if base not in {normalized_api_url(a) for a in allowed}:
        raise ApiUrlRefused(f"the API URL {base!r} is not one of the operator's {setting}")
    return base


class JsonApi:
    """A JSON API at `base_url` reached with `headers`; each of `secrets` is scrubbed from every message it raises."""

    def __init__(self, host: str, base_url: str, headers: Mapping[str, str], *, secrets: Iterable[str],
                 timeout_s: float) -> None:
        if problem := api_url_problem(base_url):
            raise ApiUrlRefused(f"the {host} API URL {base_url!r} {problem}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be above 0, not {timeout_s!r}")
        self.host, self._secrets = host, tuple(secrets)
        # No redirects: a 3xx is an error, so the token's header never follows a host's answer anywhere else.
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=dict(headers), timeout=timeout_s,
                                  follow_redirects=False)

    @property
    def base_url(self) -> str:
        return str(self._http.base_url).rstrip("/")

    def request(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                json: Any = None) -> Any:
        """The decoded JSON answer (None for an empty one), or a HostError / NoAnswer naming the call."""
        call = f"{self.host} {method} {path}"
        try:
            response = self._http.request(method, path, params=params, json=json)
        except httpx.HTTPError as exc:  # refused, reset, timed out: the text holds no header, scrubbed all the same
            raise NoAnswer(scrub(f"{call}: {type(exc).__name__}: {exc}"[:500], *self._secrets)) from None
        if not response.is_success:
            raise _error(call, response, self._secrets)
        try:
            return response.json() if response.content else None
        except ValueError:
            raise HostError(f"{call}: {response.status_code} with a body that is not JSON",
                            status=response.status_code) from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JsonApi({self.host}, {self.base_url})"


class HostClient:
    """What every host's client (GitHub, GitLab, Jira) shares: its JsonApi in `_api`, closed by `close` or a
    `with` block, and a repr that names the host's URL, never its credential."""

    _api: JsonApi

    def close(self) -> None:
        self._api.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._api.base_url})"


def _error(call: str, response: httpx.Response, secrets: tuple[str, ...]) -> HostError:
    status = response.status_code
    kind: type[HostError] = {401: TokenRefused, 403: TokenRefused, 404: NotFound}.get(
        status, RequestRefused if status in (400, 409, 422) else HostError)
    if status == 429 or (status == 403 and _rate_limited(response.headers)):
        kind = RateLimited
    after = retry_after(response.headers) if kind is RateLimited or status >= 500 else None  # a 503's too
    wait = "retry later" if after is None else f"retry after {after:.0f}s"
    hint = {TokenRefused: " (the token was refused, or lacks the scope this call needs)",
            NotFound: " (no such resource, or the token may not see it)",
            RateLimited: f" (rate limited; {wait})"}.get(kind, "" if after is None else f" ({wait})")
    text = scrub(_host_message(response), *secrets)[:MESSAGE_MAX_CHARS]
    return kind(f"{call}: {status} {text}{hint}", status=status, retry_after_s=after)


def retry_after(headers: httpx.Headers) -> float | None:
    """Retry-After in seconds (the delta form every host here sends), or None when absent or a date."""
    after = headers.get("retry-after", "").strip()
    return float(after) if re.fullmatch(r"[0-9]{1,9}", after) else None  # not str.isdigit: "²" is a digit to it


def _rate_limited(headers: httpx.Headers) -> bool:
    return "retry-after" in headers or headers.get("x-ratelimit-remaining") == "0"


def _host_message(response: httpx.Response) -> str:
    """The host's own words, whichever of the three shapes it uses: GitHub {"message", "errors": [...]}, GitLab
    {"message": str | list | dict} or {"error": ...}, Jira {"errorMessages": [...], "errors": {field: text}}."""
    try:
        data = response.json()
    except ValueError:
        return " ".join(response.text.split()) or response.reason_phrase
    if not isinstance(data, dict):
        return str(data)
    words = [w for key in ("message", "error", "errorMessages", "errors") for w in _flatten(data.get(key))]
    return "; ".join(words) or response.reason_phrase


def _flatten(value: Any) -> list[str]:
    if value is None or value == "" or value == [] or value == {}:
        return []
    if isinstance(value, list):
        return [w for item in value for w in _flatten(item)]
    if isinstance(value, dict):
        if "message" in value:
            return _flatten(value["message"])
        if {"resource", "field", "code"} & value.keys():  # GitHub's validation error
            return [" ".join(str(value.get(k, "")) for k in ("resource", "field", "code")).strip()]
        return [f"{k}: {'; '.join(_flatten(v))}" for k, v in value.items()]
    return [str(value)]


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
