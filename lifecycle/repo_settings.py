"""A project's repository connection: host kinds and the validators of its typed fields.

The fields live on Project (lifecycle/models/tenancy.py); these validators run in its admin form (through the
model's full_clean) and are read again where a value is used, since the operator may narrow an allow-list after a
project was saved. Environment variable names are tenant input that decide which of the worker's secrets is read:
only names on the operator's lists pass, and no value is ever stored or repeated in an error.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from agents.delivery.api import normalized_api_url
from agents.repo.budget import DEFAULT_CONTEXT_TOKENS, context_budget
from agents.repo.scope import DEFAULT_MAX_LINES, DEFAULT_MAX_MODULES

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
_SLACK_CHANNEL = re.compile(r"[CG][A-Z0-9]{6,20}")  # a public (C…) or private (G…) channel's id, not its #name


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


def token_envs_named(token_env: str, project_settings: Any) -> list[tuple[str, str]]:
    """(where, name) of every host token variable a project names: its token_env field and its Jira settings'.
    The one list the cross-organization rule (selectors.token_env_refusal) is applied to, when saved and used."""
    jira = project_settings.get("jira") if isinstance(project_settings, Mapping) else None
    named = [("token_env", token_env)]
    if isinstance(jira, Mapping) and isinstance(jira.get("token_env"), str):
        named.append(("settings.jira.token_env", jira["token_env"]))
    return [(where, env) for where, env in named if env]


def secret_variable_problems(project: Project) -> list[str]:
    """Each stored variable name of `project` that the operator's lists no longer allow (names only, no values)."""
    named = [("token_env", project.token_env, settings.AITEAM_TOKEN_ENVS, "AITEAM_TOKEN_ENVS")]
    named += [(f"{source}_webhook_secret_env", getattr(project, f"{source}_webhook_secret_env"),
               settings.AITEAM_WEBHOOK_SECRET_ENVS, "AITEAM_WEBHOOK_SECRET_ENVS") for source in ("github", "gitlab", "jira")]
    return [f"{field} {value!r} is not on {setting}; it is refused until an admin of its organization changes it"
            for field, value, allowed, setting in named if value and value not in allowed]


def scope_values(config: Any) -> dict[str, int]:
    """`settings["scope"]` with the defaults for what it leaves out; ValueError naming the key of a bad value (a
    guard that silently fell back would guard nothing)."""
    if not isinstance(config, Mapping):
        raise ValueError('settings.scope must be a JSON object, e.g. {"max_lines": 300, "max_modules": 2}')
    values = {}
    for key, default in (("max_lines", DEFAULT_MAX_LINES), ("max_modules", DEFAULT_MAX_MODULES)):
        value = config.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"settings.scope.{key} must be a whole number above 0, not {value!r}")
        values[key] = value
    return values


def repository_settings_problems(project_settings: Mapping[str, Any]) -> list[str]:
    """What is wrong with the settings a run on a repository reads (docs/adr/0035), each naming its key: the one
    check the admin form and any other writer of Project.settings run before saving. Where a value is used it is
    checked again (scope_guard, budgets, host_settings), since the operator's lists may narrow meanwhile."""
    problems = [f"{key} must be true or false, not {project_settings[key]!r}" for key in ("draft", "ticket_comments")
                if key in project_settings and not isinstance(project_settings[key], bool)]
    for key, check in (("scope", _scope), ("context_tokens", _context_tokens), ("test_command", _test_command),
                       ("github", _github), ("gitlab", _gitlab), ("jira", _jira), ("slack_channel", _slack_channel)):
        if project_settings.get(key) is not None:
            try:
                check(project_settings[key])
            except (ValueError, ValidationError) as exc:
                problems += exc.messages if isinstance(exc, ValidationError) else [str(exc)]
    return problems


def _scope(config: Any) -> None:
    """As the scope guard reads it, and no key it would ignore (a misspelt limit would leave the default)."""
    unknown = sorted(set(config) - set(scope_values(config)))
    if unknown:
        raise ValueError(f"settings.scope has no key {', '.join(unknown)}: it takes max_lines and max_modules")


def _context_tokens(tokens: Any) -> None:
    if not isinstance(tokens, Mapping):
        raise ValueError(f'settings["context_tokens"] is a mapping of role to tokens, not {tokens!r}')
    unknown = sorted(set(tokens) - set(DEFAULT_CONTEXT_TOKENS))
    if unknown:
        raise ValueError(f'settings["context_tokens"] names no role of a repository run: {", ".join(unknown)} (the '
                         f'roles are {", ".join(DEFAULT_CONTEXT_TOKENS)})')
    for role in tokens:
        context_budget(role, tokens)


def _test_command(command: Any) -> None:
    """A command line (its kind and paths are checked against the repository when it is prepared)."""
    if not isinstance(command, str) or not command.strip():
        raise ValueError(f"test_command must be a command line such as 'pytest tests', not {command!r}")
    try:
        shlex.split(command)
    except ValueError as exc:
        raise ValueError(f"test_command {command!r} cannot be split into words ({exc})") from None


def _slack_channel(channel: Any) -> None:
    """Where the project's system conversations are posted; its workspace is checked by the project form."""
    if not isinstance(channel, str) or not _SLACK_CHANNEL.fullmatch(channel):
        raise ValueError(f"slack_channel must be a Slack channel's id such as C0123ABCD (its details in Slack show "
                         f"it), not {channel!r}")


def _github(config: Any) -> None:
    _host(config, "github", {"repository": "owner/name", "api_url": None})
    _allowed(config, "github", "api_url", settings.AITEAM_GITHUB_API_URLS, "AITEAM_GITHUB_API_URLS")


def _gitlab(config: Any) -> None:
    _host(config, "gitlab", {"project": "group/name", "url": None})
    _allowed(config, "gitlab", "url", settings.AITEAM_GITLAB_URLS, "AITEAM_GITLAB_URLS")


def _jira(config: Any) -> None:
    _host(config, "jira", {"site_url": None, "email": "the account's address", "token_env": None})
    _allowed(config, "jira", "site_url", settings.AITEAM_JIRA_URLS, "AITEAM_JIRA_URLS")
    _on_list(config.get("token_env", ""), settings.AITEAM_TOKEN_ENVS, "AITEAM_TOKEN_ENVS")


def _host(config: Any, name: str, keys: dict[str, str | None]) -> None:
    """A JSON object of known keys whose values are strings (token_env of github is refused by moved_settings)."""
    if not isinstance(config, Mapping):
        raise ValueError(f"settings.{name} must be a JSON object with {', '.join(keys)}")
    unknown = sorted(set(config) - set(keys) - ({"token_env"} if name == "github" else set()))
    if unknown:
        raise ValueError(f"settings.{name} has no key {', '.join(unknown)}: it takes {', '.join(keys)}")
    for key, value in config.items():
        if not isinstance(value, str) or not value.strip():
            example = f", e.g. {keys[key]}" if keys.get(key) else ""
            raise ValueError(f"settings.{name}.{key} must be a non-empty string{example}")


def _allowed(config: Mapping[str, str], name: str, key: str, allowed: list[str], setting: str) -> None:
    if key in config and normalized_api_url(config[key]) not in [normalized_api_url(url) for url in allowed]:
        raise ValueError(f"settings.{name}.{key} {config[key]!r} is not one of the operator's {setting} "
                         f"({', '.join(allowed) or 'none'})")
