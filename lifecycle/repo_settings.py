"""A project's repository connection: host kinds and the validators of its typed fields.

The fields live on Project (lifecycle/models/tenancy.py); these validators run in its admin form (through the
model's full_clean) and are read again where a value is used, since the operator may narrow an allow-list after a
project was saved. Environment variable names are tenant input that decide which of the worker's secrets is read:
only names on the operator's lists pass, and no value is ever stored or repeated in an error.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

if TYPE_CHECKING:  # the model imports this module for its validators
    from lifecycle.models import Project


class HostKind(models.TextChoices):
    GIT = "git", "plain git"
    GITHUB = "github", "GitHub"
    GITLAB = "gitlab", "GitLab"


# git check-ref-format's rules, as a whitelist: words of safe characters joined by single slashes
_BRANCH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")
_HOST = re.compile(r"^(?:[a-z+]+://)?(?:[^@/]*@)?([a-z0-9.-]+)")  # https://host/…, ssh://git@host/…, git@host:…
_LABEL = re.compile(r"[^\x00-\x1f\x7f]{1,100}")


def validate_branch_name(value: str) -> None:
    """A branch git accepts and no command line can mistake for an option (no leading '-', no '..', no '.lock')."""
    if not _BRANCH.fullmatch(value or "") or ".." in value or value.endswith((".", ".lock")) or "/." in value:
        raise ValidationError("a branch name such as main or release/2.1: letters, digits, '.', '_', '-', single "
                              "'/' between parts; no '..', no leading '-' or '.', not ending in '.' or '.lock'")


def validate_token_env(value: str) -> None:
    """The token's variable must be one the operator lists; empty means no token (a local or ssh remote)."""
    _on_list(value, settings.AITEAM_TOKEN_ENVS, "AITEAM_TOKEN_ENVS")


def validate_webhook_secret_env(value: str) -> None:
    """A webhook's shared secret is read from this variable; empty turns that webhook off."""
    _on_list(value, settings.AITEAM_WEBHOOK_SECRET_ENVS, "AITEAM_WEBHOOK_SECRET_ENVS")


def validate_label(value: str) -> None:
    if not _LABEL.fullmatch(value or "") or value != value.strip():
        raise ValidationError("a label of 1 to 100 characters, without control characters or surrounding spaces")


def _on_list(value: str, allowed: list[str], setting: str) -> None:
    if value and value not in allowed:
        listed = ", ".join(allowed) or "none"
        raise ValidationError(f"'{value}' is not one of the operator's {setting} ({listed})")


def host_kind_of(url: str) -> str:
    """The host kind a remote URL most likely is, for projects saved before the field existed."""
    match = _HOST.search(url.lower())
    return {"github.com": HostKind.GITHUB, "gitlab.com": HostKind.GITLAB}.get(match[1] if match else "", HostKind.GIT)


def moved_settings(project_settings: dict) -> list[str]:
    """Keys of Project.settings that became fields (migration 0022): refused, so a value is never set in a place
    nothing reads."""
    github = project_settings.get("github")
    problems = ["base_branch: now a field of the project (base branch), not a settings key"] \
        if "base_branch" in project_settings else []
    if isinstance(github, dict) and "token_env" in github:
        problems.append("github.token_env: now a field of the project (token env), not a settings key")
    return problems


def secret_variable_problems(project: Project) -> list[str]:
    """Each stored variable name of `project` that the operator's lists no longer allow (names only, no values)."""
    named = [("token_env", project.token_env, settings.AITEAM_TOKEN_ENVS, "AITEAM_TOKEN_ENVS")]
    named += [(f"{source}_webhook_secret_env", getattr(project, f"{source}_webhook_secret_env"),
               settings.AITEAM_WEBHOOK_SECRET_ENVS, "AITEAM_WEBHOOK_SECRET_ENVS") for source in ("github", "gitlab", "jira")]
    return [f"{field} {value!r} is not on {setting}; it is refused until an admin of its organization changes it"
            for field, value, allowed, setting in named if value and value not in allowed]
