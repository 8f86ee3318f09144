"""The operator's bindings of secrets to organizations, read from the environment (aiteam/settings.py).

- AITEAM_TOKEN_ENVS: `NAME` (a token variable any one organization may name: the first whose project names it
  keeps it) or `NAME=org-slug` (that organization's only).
- AITEAM_SSH_IDENTITIES: `org-slug=/absolute/path/to/key`: the one ssh key that organization's ssh remotes use.
  One key per organization and one organization per key: a key two organizations share lets each reach what the
  other's key may (docs/adr/0043).
Bad entries fail loudly at startup, naming the entry, never a secret (a path or a variable name is not one).
"""
from __future__ import annotations

import re
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from agents.delivery.remotes import ssh_key_problem

_SLUG = re.compile(r"[-a-zA-Z0-9_]+")  # Organization.slug is a SlugField


def token_env_organizations(name: str, entries: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """(every variable name listed, {name: organization slug} for the bound ones), from env_map's entries."""
    bad = [f"{env}={slug}" for env, slug in entries.items() if slug and not _SLUG.fullmatch(slug)]
    if bad:
        raise ImproperlyConfigured(f"{name}: {', '.join(bad)}: after '=' comes an organization's slug")
    return list(entries), {env: slug for env, slug in entries.items() if slug}


def ssh_identities(name: str, entries: dict[str, str]) -> dict[str, Path]:
    """{organization slug: its ssh key's path}, from env_map's entries."""
    problems = [f"{slug!r} is not an organization's slug" for slug in entries if not _SLUG.fullmatch(slug)]
    problems += [f"the key of {slug!r} {problem}" for slug, path in entries.items() if (problem := ssh_key_problem(path))]
    shared = sorted({path for path in entries.values() if list(entries.values()).count(path) > 1})
    problems += [f"{path} is bound to more than one organization: give each its own key" for path in shared]
    if problems:
        raise ImproperlyConfigured(f"{name}: {'; '.join(problems)}")
    return {slug: Path(path) for slug, path in entries.items()}
