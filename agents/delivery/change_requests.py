"""A change request on the host the saga delivers to: a pull request (GitHub) or a merge request (GitLab).

The saga speaks to `ChangeRequests` only (find the open one from a branch, open one, update its title and body, close
one), so its rules (reuse an open one with this run's text, register the undo before each change, adopt one whose
opening got no answer, never close one it did not open) are written once for both hosts.
"""
from __future__ import annotations

from typing import Protocol

from agents.delivery.api import ChangeRequest
from agents.delivery.github import GitHubClient, GitHubSettings
from agents.delivery.github import as_change_request as pull_request
from agents.delivery.gitlab import GitLabClient, GitLabSettings
from agents.delivery.gitlab import as_change_request as merge_request

HostSettings = GitHubSettings | GitLabSettings


class ChangeRequests(Protocol):
    host: str  # "github" or "gitlab"
    noun: str  # "pull request" or "merge request"
    target: str  # the repository ("owner/name") or project ("group/name") the change request is opened on
    draft: bool

    def find_open(self, branch: str) -> ChangeRequest | None: ...

    def open(self, branch: str, base: str, title: str, body: str) -> ChangeRequest: ...

    def update(self, change: ChangeRequest, title: str, body: str) -> None: ...

    def close(self, number: int) -> None: ...

    def close_client(self) -> None: ...


class GitHubPulls:
    host, noun = "github", "pull request"

    def __init__(self, settings: GitHubSettings) -> None:
        self.target, self.draft = settings.repository, settings.draft
        self._client = GitHubClient.from_settings(settings)

    def find_open(self, branch: str) -> ChangeRequest | None:
        found = self._client.find_open_pull(self.target, branch)
        return pull_request(found, reused=True) if found else None

    def open(self, branch: str, base: str, title: str, body: str) -> ChangeRequest:
        return pull_request(self._client.open_pull(self.target, branch, base, title, body, draft=self.draft),
                            reused=False)

    def update(self, change: ChangeRequest, title: str, body: str) -> None:
        self._client.update_pull(self.target, change.number, title, body)

    def close(self, number: int) -> None:
        self._client.close_pull(self.target, number)

    def close_client(self) -> None:
        self._client.close()


class GitLabMergeRequests:
    host, noun = "gitlab", "merge request"

    def __init__(self, settings: GitLabSettings) -> None:
        self.target, self.draft = settings.project, settings.draft
        self._client = GitLabClient.from_settings(settings)

    def find_open(self, branch: str) -> ChangeRequest | None:
        found = self._client.find_open_merge_request(self.target, branch)
        return merge_request(found, reused=True) if found else None

    def open(self, branch: str, base: str, title: str, body: str) -> ChangeRequest:
        return merge_request(self._client.open_merge_request(self.target, branch, base, title, body, draft=self.draft),
                            reused=False)

    def update(self, change: ChangeRequest, title: str, body: str) -> None:
        self._client.update_merge_request(self.target, change.number, title, body, draft=change.draft)

    def close(self, number: int) -> None:
        self._client.close_merge_request(self.target, number)

    def close_client(self) -> None:
        self._client.close()


def change_requests_for(settings: HostSettings) -> ChangeRequests:
    return GitHubPulls(settings) if isinstance(settings, GitHubSettings) else GitLabMergeRequests(settings)

