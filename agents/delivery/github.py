"""The calls of GitHub's REST API that delivery needs: find, open and close a pull request, comment on an issue.

The token goes into the Authorization header and nowhere else: not into reprs, log lines or error messages (error
text is scrubbed of it in case a response echoes it back; agents/delivery/api.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agents.delivery.api import ChangeRequest, HostClient, JsonApi, RequestRefused
from agents.delivery.errors import DeliveryError
from agents.delivery.rich_text import bounded

DEFAULT_API_URL = "https://api.github.com"
TITLE_MAX_CHARS = 256  # GitHub refuses a longer pull request title (422)
_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class GitHubSettings:
    repository: str  # "owner/name"
    token: str = field(repr=False)
    api_url: str = DEFAULT_API_URL
    timeout_s: float = 30.0
    draft: bool = False  # open pull requests as drafts


class GitHubClient(HostClient):
    def __init__(self, token: str, *, api_url: str = DEFAULT_API_URL, timeout_s: float = 30.0) -> None:
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "aiteam-delivery",
        }
        self._api = JsonApi("GitHub", api_url, headers, secrets=[token], timeout_s=timeout_s)

    @classmethod
    def from_settings(cls, settings: GitHubSettings) -> GitHubClient:
        return cls(settings.token, api_url=settings.api_url, timeout_s=settings.timeout_s)

    def find_open_pull(self, repo: str, head_branch: str) -> dict[str, Any] | None:
        """The open pull request from `head_branch` of `repo` itself (GitHub filters by "owner:branch")."""
        owner = _checked(repo).split("/")[0]
        pulls = self._api.request("GET", f"/repos/{repo}/pulls", params={"head": f"{owner}:{head_branch}", "state": "open"})
        return pulls[0] if pulls else None

    def open_pull(self, repo: str, head: str, base: str, title: str, body: str, *, draft: bool = False) -> dict[str, Any]:
        payload: dict[str, Any] = {"head": head, "base": base, "title": bounded(title, TITLE_MAX_CHARS), "body": body}
        if draft:  # sent only when asked: plans without drafts refuse the field even when it is false
            payload["draft"] = True
        return self._api.request("POST", f"/repos/{_checked(repo)}/pulls", json=payload)

    def ensure_pull(self, repo: str, head: str, base: str, title: str, body: str, *,
                    draft: bool = False) -> ChangeRequest:
        """The open pull request from `head`, opened unless one already is: calling it again opens none."""
        if found := self.find_open_pull(repo, head):
            return as_change_request(found, reused=True)
        try:
            return as_change_request(self.open_pull(repo, head, base, title, body, draft=draft), reused=False)
        except RequestRefused as exc:  # 422 "already exists": another run opened it between the lookup and the POST
            if exc.status == 422 and (found := self.find_open_pull(repo, head)):
                return as_change_request(found, reused=True)
            raise

    def update_pull(self, repo: str, number: int, title: str, body: str) -> dict[str, Any]:
        """A new title and body for pull request `number` (its draft state is GitHub's own field, left as it is)."""
        return self._api.request("PATCH", f"/repos/{_checked(repo)}/pulls/{int(number)}",
                                 json={"title": bounded(title, TITLE_MAX_CHARS), "body": body})

    def close_pull(self, repo: str, number: int) -> dict[str, Any]:
        return self._api.request("PATCH", f"/repos/{_checked(repo)}/pulls/{int(number)}", json={"state": "closed"})

    def comment_on_issue(self, repo: str, number: int, body: str) -> dict[str, Any]:
        """A comment on issue (or pull request) `number`; GitHub answers 201 with the comment and its html_url."""
        return self._api.request("POST", f"/repos/{_checked(repo)}/issues/{int(number)}/comments", json={"body": body})


def _checked(repo: str) -> str:
    if not _REPOSITORY.match(repo):
        raise DeliveryError(f"not a GitHub repository name (owner/name): {repo!r}")
    return repo


def as_change_request(pull: dict[str, Any], *, reused: bool) -> ChangeRequest:
    return ChangeRequest(number=int(pull["number"]), url=str(pull.get("html_url", "")),
                         draft=bool(pull.get("draft", False)), reused=reused, title=str(pull.get("title") or ""),
                         body=str(pull.get("body") or ""))
