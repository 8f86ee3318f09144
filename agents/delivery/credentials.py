"""A host token handed to git through its environment, never through a URL, an argument or a config file.

git reads `GIT_CONFIG_COUNT` / `GIT_CONFIG_KEY_n` / `GIT_CONFIG_VALUE_n` as if they were `-c` options, but they
live in the child's environment, which only its own user can read (`/proc/<pid>/environ`), whereas the argument
list is world-readable (`ps`, `/proc/<pid>/cmdline`) and a URL's userinfo lands in `.git/config`, reflogs and
error text. The token becomes an `Authorization: Basic` header scoped to the remote's own scheme and host, so
git sends it to that host only, and redirects are off (for a tokenless https remote too), so a moved repository
is an error rather than a header sent elsewhere. Only https remotes get it: ssh and local remotes never see the
token.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from agents.delivery.errors import DeliveryError, scrub

# The user name each host expects beside a token over https; plain git hosts vary, GitHub's works for most.
USERNAMES = {"github": "x-access-token", "gitlab": "oauth2", "git": "x-access-token"}


@dataclass(frozen=True)
class HostAuth:
    """A token for the project's https remote. `ca_file`: the operator's CA bundle for a self-hosted host."""

    token: str = field(repr=False)
    username: str = "x-access-token"
    ca_file: Path | None = None

    def __post_init__(self) -> None:
        # a header value with a line break would let the token's holder add headers of its choosing
        if not self.token or any(c.isspace() or not c.isprintable() for c in self.token):
            raise DeliveryError("the host token is empty or holds whitespace or control characters")
        if not self.username or any(c.isspace() or c == ":" or not c.isprintable() for c in self.username):
            raise DeliveryError("the token's user name is empty or holds whitespace, ':' or control characters")

    @classmethod
    def for_host(cls, host_kind: str, token: str, *, ca_file: Path | None = None) -> HostAuth:
        if host_kind not in USERNAMES:
            raise DeliveryError(f"unknown host kind {host_kind!r}: one of {', '.join(sorted(USERNAMES))}")
        return cls(token, USERNAMES[host_kind], ca_file)

    def header(self) -> str:
        pair = base64.b64encode(f"{self.username}:{self.token}".encode()).decode("ascii")
        return f"Authorization: Basic {pair}"

    def secrets(self) -> tuple[str, ...]:
        """Every form in which the token could show up in text: as given and inside the header."""
        return (self.token, self.header().removeprefix("Authorization: Basic "))


def git_env(url: str, auth: HostAuth | None) -> dict[str, str]:
    """The environment variables that give git the token (and CA bundle) for `url`, and keep https from following
    a redirect, token or not (a moved repository is an error: ADR 31); none for ssh or local remotes."""
    parts = urlsplit(url) if "://" in url else None
    if parts is None or parts.scheme.lower() != "https":
        return {}
    if auth is None:
        return _as_env([("http.followRedirects", "false")])
    scope = f"https://{parts.netloc.rpartition('@')[2]}/"  # git matches http.<url>.* by prefix: this host only
    config = [(f"http.{scope}.extraHeader", auth.header()), ("http.followRedirects", "false")]
    if auth.ca_file is not None:
        config.append((f"http.{scope}.sslCAInfo", str(auth.ca_file)))
    return _as_env(config)


def _as_env(config: list[tuple[str, str]]) -> dict[str, str]:
    env = {"GIT_CONFIG_COUNT": str(len(config))}
    for number, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{number}"], env[f"GIT_CONFIG_VALUE_{number}"] = key, value
    return env


def scrub_auth(text: str, auth: HostAuth | None) -> str:
    """Error text with credentialed URLs stripped and the token, in every form, replaced by ***."""
    return scrub(text, *(auth.secrets() if auth else ()))
