"""Which host a project's pull requests, merge requests and ticket comments go to, with which token: read from its
settings where they are used, checked against the operator's allow-lists each time (the operator may have narrowed
them since the project was saved). A tenant must not be able to point the worker's secrets at a URL of its choosing.

- GitHub: settings["github"] = {"repository": "owner/name", "api_url": one of AITEAM_GITHUB_API_URLS}
- GitLab: settings["gitlab"] = {"project": "group/name", "url": one of AITEAM_GITLAB_URLS (the instance)}
- Jira: settings["jira"] = {"site_url": one of AITEAM_JIRA_URLS, "email": the account's, "token_env": its API
  token's variable, one of AITEAM_TOKEN_ENVS}
GitHub's and GitLab's token is the project's `token_env`, the same that pushes its branches.
"""
from __future__ import annotations

import os

from django.conf import settings

from agents.delivery.api import ApiUrlRefused, checked_api_url
from agents.delivery.github import GitHubSettings
from agents.delivery.gitlab import DEFAULT_URL as GITLAB_URL
from agents.delivery.gitlab import GitLabSettings
from agents.delivery.jira import JiraSettings
from lifecycle.errors import DomainError
from lifecycle.models import Project
from lifecycle.repo_settings import HostKind
from lifecycle.selectors import token_env_refusal


def github_settings(project: Project, *, draft: bool = False) -> GitHubSettings | None:
    """A pull request (or an issue comment) on a GitHub project whose settings name the repository."""
    config = project.settings.get("github") or {}
    if project.host_kind != HostKind.GITHUB or not config.get("repository"):
        return None
    token = host_token(project, "a pull request")
    api_url = _allowed(str(config.get("api_url", "https://api.github.com")), settings.AITEAM_GITHUB_API_URLS,
                       "AITEAM_GITHUB_API_URLS")
    return GitHubSettings(repository=config["repository"], token=token, api_url=api_url, draft=draft)


def gitlab_settings(project: Project, *, draft: bool = True) -> GitLabSettings | None:
    """A merge request (or an issue note) on a GitLab project whose settings name it."""
    config = project.settings.get("gitlab") or {}
    if project.host_kind != HostKind.GITLAB or not config.get("project"):
        return None
    token = host_token(project, "a merge request")
    url = _allowed(str(config.get("url", GITLAB_URL)), settings.AITEAM_GITLAB_URLS, "AITEAM_GITLAB_URLS")
    return GitLabSettings(project=str(config["project"]), token=token, url=url, draft=draft)


def _allowed(url: str, allowed: list[str], setting: str) -> str:
    """`url` normalized, when the operator's list `setting` has it (compared as the form compared it: one rule)."""
    try:
        return checked_api_url(url, allowed, setting)
    except ApiUrlRefused as exc:
        raise DomainError(str(exc), "settings") from None


def host_token(project: Project, needs: str) -> str:
    if not project.token_env:
        raise DomainError(f"{needs} needs a token: set the project's token_env", "token_env")
    return token_of(project, project.token_env)


def token_of(project: Project, env: str, field: str = "token_env") -> str:
    """The value of a token variable the project names: one on the operator's AITEAM_TOKEN_ENVS, named by this
    organization (selectors.token_env_refusal, the admin form's rule too), and set on the worker. Checked where it
    is used, not only when saved: the operator may have narrowed the list, and a project saved before this rule may
    name another organization's variable."""
    if env not in settings.AITEAM_TOKEN_ENVS:
        raise DomainError(f"token_env {env!r} is not one of the operator's AITEAM_TOKEN_ENVS", field)
    if reason := token_env_refusal(env, project):
        raise DomainError(reason, field)
    if not (token := os.environ.get(env, "")):
        raise DomainError(f"the worker has no value for {env}: the operator sets it", field)
    return token


def jira_settings(project: Project) -> JiraSettings | None:
    """Jira Cloud, for comments on a Jira ticket; None when the project names no Jira site."""
    config = project.settings.get("jira") or {}
    if not config.get("site_url"):
        return None
    site = _allowed(str(config["site_url"]), settings.AITEAM_JIRA_URLS, "AITEAM_JIRA_URLS")
    token = token_of(project, str(config.get("token_env") or ""), "settings")
    return JiraSettings(site_url=site, email=str(config.get("email") or ""), token=token)
