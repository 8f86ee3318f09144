"""The calls of GitLab's REST API (v4) that delivery needs: find, open and close a merge request, comment on an issue.

A project is named by its path ("group/subgroup/name"), sent URL-encoded as GitLab's `:id` ("group%2Fsubgroup%2Fname"),
or by its number. The token goes in the `PRIVATE-TOKEN` header, which GitLab takes from personal, project and group
access tokens alike (`Authorization: Bearer` is OAuth's form); never in a URL. A merge request is a draft by the
`Draft: ` title prefix, which GitLab reads in every current version, where a `draft` parameter is not accepted by all.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from agents.delivery.api import ChangeRequest, HostClient, JsonApi, RequestRefused
from agents.delivery.errors import DeliveryError
from agents.delivery.rich_text import bounded

DEFAULT_URL = "https://gitlab.com"
TITLE_MAX_CHARS = 255  # GitLab refuses a longer merge request title
_PROJECT = re.compile(r"^(?:[0-9]+|[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+)$")
_DRAFT = re.compile(r"^\s*(\[draft\]|\(draft\)|draft:|draft\s-\s)", re.IGNORECASE)  # GitLab's own draft prefixes


@dataclass(frozen=True)
class GitLabSettings:
    project: str  # "group/name" or the project's number
    token: str = field(repr=False)
    url: str = DEFAULT_URL  # the instance, without /api/v4
    timeout_s: float = 30.0
    draft: bool = True


class GitLabClient(HostClient):
    def __init__(self, token: str, *, url: str = DEFAULT_URL, timeout_s: float = 30.0) -> None:
        headers = {"PRIVATE-TOKEN": token, "Accept": "application/json", "User-Agent": "aiteam-delivery"}
        self._api = JsonApi("GitLab", f"{url.rstrip('/')}/api/v4", headers, secrets=[token], timeout_s=timeout_s)

    @classmethod
    def from_settings(cls, settings: GitLabSettings) -> GitLabClient:
        return cls(settings.token, url=settings.url, timeout_s=settings.timeout_s)

    def find_open_merge_request(self, project: str, source_branch: str) -> dict[str, Any] | None:
        """The open merge request from this project's own branch: GitLab's filter by source branch also answers
        merge requests opened from forks (any user's fork may have a branch of that name), which are not ours."""
        found = self._api.request("GET", f"{_base(project)}/merge_requests",
                                  params={"source_branch": source_branch, "state": "opened"})
        ours = [mr for mr in found or () if mr.get("source_project_id") == mr.get("target_project_id")]
        return ours[0] if ours else None

    def open_merge_request(self, project: str, source: str, target: str, title: str, description: str, *,
                           draft: bool = True) -> dict[str, Any]:
        payload = {"source_branch": source, "target_branch": target, "title": draft_title(title, draft),
                   "description": description}
        return self._api.request("POST", f"{_base(project)}/merge_requests", json=payload)

    def ensure_merge_request(self, project: str, source: str, target: str, title: str, description: str, *,
                             draft: bool = True) -> ChangeRequest:
        """The open merge request from `source`, opened unless one already is: calling it again opens none."""
        if found := self.find_open_merge_request(project, source):
            return as_change_request(found, reused=True)
        try:
            return as_change_request(self.open_merge_request(project, source, target, title, description, draft=draft),
                                   reused=False)
        except RequestRefused as exc:  # 409 "Another open merge request already exists": opened meanwhile
            if exc.status == 409 and (found := self.find_open_merge_request(project, source)):
                return as_change_request(found, reused=True)
            raise

    def update_merge_request(self, project: str, iid: int, title: str, description: str, *,
                             draft: bool) -> dict[str, Any]:
        """A new title and description for merge request `iid`; `draft`: whether it is one now (its title says so)."""
        payload = {"title": draft_title(title, draft), "description": description}
        return self._api.request("PUT", f"{_base(project)}/merge_requests/{int(iid)}", json=payload)

    def close_merge_request(self, project: str, iid: int) -> dict[str, Any]:
        return self._api.request("PUT", f"{_base(project)}/merge_requests/{int(iid)}", json={"state_event": "close"})

    def comment_on_issue(self, project: str, iid: int, body: str) -> dict[str, Any]:
        """A note on issue `iid` (the number people see, not GitLab's global id); 201 with the note."""
        return self._api.request("POST", f"{_base(project)}/issues/{int(iid)}/notes", json={"body": body})


def draft_title(title: str, draft: bool) -> str:
    """`title` with GitLab's `Draft: ` prefix when a draft is wanted (once), at most TITLE_MAX_CHARS in all."""
    return bounded(f"Draft: {title}" if draft and not _DRAFT.match(title) else title, TITLE_MAX_CHARS)


def _base(project: str) -> str:
    if not _PROJECT.match(project) or ".." in project:
        raise DeliveryError(f"not a GitLab project (group/name or a number): {project!r}")
    return f"/projects/{quote(project, safe='')}"


def as_change_request(mr: dict[str, Any], *, reused: bool) -> ChangeRequest:
    return ChangeRequest(number=int(mr["iid"]), url=str(mr.get("web_url", "")),
                         draft=bool(mr.get("draft", mr.get("work_in_progress", False))), reused=reused,
                         title=str(mr.get("title") or ""), body=str(mr.get("description") or ""))
