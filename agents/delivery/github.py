"""The three calls of GitHub's REST API that delivery needs: find, open and close a pull request.

The token goes into the Authorization header and nowhere else: not into reprs, log lines or
error messages (error text is scrubbed of it in case a response echoes it back).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Self

import httpx

from agents.delivery.errors import DeliveryError, NoAnswer, scrub

DEFAULT_API_URL = "https://api.github.com"
_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class GitHubSettings:
    repository: str  # "owner/name"
    token: str = field(repr=False)
    api_url: str = DEFAULT_API_URL
    timeout_s: float = 30.0


class GitHubClient:
    def __init__(self, token: str, *, api_url: str = DEFAULT_API_URL, timeout_s: float = 30.0) -> None:
        self._token = token
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "aiteam-delivery",
        }
        self._http = httpx.Client(base_url=api_url.rstrip("/"), headers=headers, timeout=timeout_s)

    @classmethod
    def from_settings(cls, settings: GitHubSettings) -> GitHubClient:
        return cls(settings.token, api_url=settings.api_url, timeout_s=settings.timeout_s)

    def find_open_pull(self, repo: str, head_branch: str) -> dict[str, Any] | None:
        """The open pull request from `head_branch` of `repo` itself (GitHub filters by "owner:branch")."""
        owner = _checked(repo).split("/")[0]
        pulls = self._request("GET", f"/repos/{repo}/pulls", params={"head": f"{owner}:{head_branch}", "state": "open"})
        return pulls[0] if pulls else None

    def open_pull(self, repo: str, head: str, base: str, title: str, body: str) -> dict[str, Any]:
        payload = {"head": head, "base": base, "title": title, "body": body}
        return self._request("POST", f"/repos/{_checked(repo)}/pulls", json=payload)

    def close_pull(self, repo: str, number: int) -> dict[str, Any]:
        return self._request("PATCH", f"/repos/{_checked(repo)}/pulls/{int(number)}", json={"state": "closed"})

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GitHubClient({self._http.base_url})"

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:  # connection refused, timeout, ...: the exception text holds no header
            raise NoAnswer(scrub(f"GitHub {method} {path}: {type(exc).__name__}: {exc}", self._token)) from None
        if not response.is_success:
            raise DeliveryError(scrub(f"GitHub {method} {path}: {response.status_code} {_message(response)}", self._token))
        try:
            return response.json() if response.content else None
        except ValueError:
            raise DeliveryError(f"GitHub {method} {path}: {response.status_code} with a body that is not JSON") from None


def _checked(repo: str) -> str:
    if not _REPOSITORY.match(repo):
        raise DeliveryError(f"not a GitHub repository name (owner/name): {repo!r}")
    return repo


def _message(response: httpx.Response) -> str:
    """GitHub's error body: {"message": ..., "errors": [{"message": ...} | {"resource", "field", "code"}]}."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if not isinstance(data, dict):
        return str(data)[:300]
    details = [e.get("message") or " ".join(str(e.get(k, "")) for k in ("resource", "field", "code")).strip()
               for e in data.get("errors") or [] if isinstance(e, dict)]
    message = str(data.get("message") or response.reason_phrase)
    return f"{message} ({'; '.join(details)})" if details else message
