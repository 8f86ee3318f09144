"""Which git remotes a project may deliver to: one rule, used when a remote is saved and before every git call.

A remote is tenant input that the worker hands to git outside the sandbox, so git could otherwise be pointed
at another tenant's repository, any local path, an internal HTTP listener, a remote helper that runs a command
(`ext::`) or an option (`--upload-pack=`). Allowed: https or ssh to a host on the operator's list, with no
credentials, query or fragment in the URL (a token never goes into a URL) and a lower-case scheme, and a local
path only under the operator's local root and only the project's own repository there. ssh only with the ssh key
the operator bound to the project's organization (docs/adr/0043): an identity, like a token, is one
organization's, so a remote with no key of its organization's is refused rather than reached with whatever key
the worker has.
"""
from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from agents.delivery.errors import DeliveryError, strip_credentials

_HELPER = re.compile(r"^[A-Za-z0-9+.-]*::")  # git's "<transport>::<address>": a remote helper, e.g. ext:: runs commands
# scp-like "[user@]host:path" (git reads it as ssh when no slash comes before the colon)
_SCP = re.compile(r"^(?:[A-Za-z0-9._~-]+@)?(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*):(?!:)(?P<path>.+)$")
_KEY_PATH = re.compile(r"/[A-Za-z0-9._+@/-]+")  # nothing a shell, or ssh's own option parser, reads specially
_ONLY_GIT_SCHEMES = ("-c", "protocol.allow=never", "-c", "protocol.https.allow=always", "-c", "protocol.ssh.allow=always")


class RemoteRefused(DeliveryError):
    """The remote is not one the operator allows: a permanent failure for a person, never retried."""


def remote_refusal(url: str, *, hosts: Iterable[str], local_root: Path | None, own_path: str,
                   ssh_key: Path | None = None) -> str | None:
    """Why `url` may not be a project's remote, or None when it may.

    `hosts`: the host names https and ssh remotes may reach. `local_root`: where local remotes may live (None:
    nowhere). `own_path`: the project's own repository relative to that root, "<organization id>/<project id>.git".
    `ssh_key`: the ssh key the operator bound to the project's organization (None: it may not use ssh).
    The reason never repeats the URL: it may hold a credential."""
    if not url:
        return "is empty"
    if url.startswith("-"):
        return "starts with '-', which git would read as an option"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "contains whitespace or control characters"
    if _HELPER.match(url):
        return "names a git remote helper ('<transport>::'), which can run commands"
    if "://" in url:
        return _url_refusal(url, {h.lower() for h in hosts}, local_root, own_path, ssh_key)
    if url.startswith("/"):
        return _local_refusal(url, local_root, own_path)
    if match := _SCP.match(url):
        query = _QUERY if "?" in match["path"] or "#" in match["path"] else None
        return _host_refusal(match["host"].lower(), {h.lower() for h in hosts}) or query or _ssh_key_refusal(ssh_key)
    return "is not an https:// or ssh:// URL (nor user@host:path)"


def _url_refusal(url: str, hosts: set[str], local_root: Path | None, own_path: str,
                 ssh_key: Path | None) -> str | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        return "is not a well-formed URL"
    scheme = parts.scheme  # urlsplit lower-cases it; git would not (it looks for a remote helper of that name)
    if not url.startswith(f"{scheme}://"):
        return f"writes its scheme in capitals: write {scheme}:// in lower case"
    if scheme == "file":
        if parts.netloc or "%" in url or parts.query or parts.fragment:
            return "is a file:// URL with a host, an escape, a query or a fragment"
        return _local_refusal(parts.path, local_root, own_path)
    if scheme not in ("https", "ssh"):
        return f"uses {scheme}://: only https:// and ssh:// remotes are allowed"
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else None
    if userinfo is not None and (scheme == "https" or ":" in userinfo):
        return "carries credentials in the URL: a token never goes into a URL (ssh may name a user, e.g. git@)"
    if "?" in url or "#" in url:  # also an empty one, which urlsplit reports as none
        return _QUERY
    return _host_refusal(parts.hostname or "", hosts) or (_ssh_key_refusal(ssh_key) if scheme == "ssh" else None)


_QUERY = "carries a query or a fragment ('?' or '#'): a remote is a repository's address only"


def _ssh_key_refusal(ssh_key: Path | None) -> str | None:
    if ssh_key is None:
        return ("is an ssh remote, and the operator has bound no ssh key to this project's organization: ask the "
                "operator to bind one (AITEAM_SSH_IDENTITIES, <organization slug>=/path/to/key), or use an https:// "
                "URL with a token (token_env)")
    if problem := ssh_key_problem(str(ssh_key)):
        return f"is an ssh remote, and the ssh key the operator bound to this project's organization {problem}"
    return None


def ssh_key_problem(path: str) -> str | None:
    """Why `path` cannot be an ssh key's path for git's ssh command line, or None."""
    if not _KEY_PATH.fullmatch(path) or "/../" in f"{path}/":
        return "is not an absolute path of letters, digits and . _ + @ - / (without '..')"
    return None


def ssh_key_file_problem(path: Path) -> str | None:
    """Why ssh, run by this process's user, could not use the key file at `path`, or None. Only the file's metadata
    is looked at, never its content. ssh ignores a private key of its own user's that others may read or write."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:  # a directory on the way this user may not enter, say
        return f"cannot be reached ({exc.strerror})"
    if not stat.S_ISREG(found.st_mode):
        return "is not a file"
    if not os.access(path, os.R_OK):
        return "is not readable by this process's user"
    if found.st_uid == os.getuid() and found.st_mode & 0o077:
        return f"may be read or written by others (mode {found.st_mode & 0o777:o}), so ssh refuses it: chmod 600 it"
    return None


def _host_refusal(host: str, hosts: set[str]) -> str | None:
    if host in hosts:
        return None
    allowed = ", ".join(sorted(hosts)) or "none"
    return f"reaches {host or 'no host'!r}, which is not an allowed git host (AITEAM_GIT_HOSTS: {allowed})"


def _local_refusal(path: str, local_root: Path | None, own_path: str) -> str | None:
    if local_root is None:
        return "is a local path: local remotes are off (AITEAM_GIT_LOCAL_ROOT is empty)"
    own = local_root / own_path if own_path else None
    if own is None or os.path.realpath(path) != os.path.realpath(own):
        return "is a local path other than this project's own repository under AITEAM_GIT_LOCAL_ROOT"
    return None


def repository_path(url: str) -> str:
    """The repository a host URL names ("owner/name", "group/sub/name": its path without `.git`); "" for a local
    path or what is not a host URL."""
    if "://" in url:
        try:
            parts = urlsplit(url)
        except ValueError:
            return ""
        path = parts.path if parts.scheme in ("https", "ssh") else ""
    else:
        match = _SCP.match(url) if not url.startswith("/") else None
        path = match["path"] if match else ""
    return path.strip("/").removesuffix(".git").strip("/")


@dataclass(frozen=True)
class Remote:
    """A project's remote and the operator's rule for it; git_remote checks it again before every git call.
    The defaults allow nothing."""

    url: str
    hosts: tuple[str, ...] = ()
    local_root: Path | None = None
    own_path: str = ""
    ssh_key: Path | None = None  # the ssh key of the project's organization: the only one git's ssh may use

    def refusal(self) -> str | None:
        return remote_refusal(self.url, hosts=self.hosts, local_root=self.local_root, own_path=self.own_path,
                              ssh_key=self.ssh_key)

    def checked_url(self) -> str:
        """The URL, or RemoteRefused with a message safe to store and show."""
        if reason := self.refusal():
            raise RemoteRefused(f"the remote {strip_credentials(self.url)!r} is refused: it {reason}")
        return self.url

    def git_config(self) -> tuple[str, ...]:
        """`-c` options limiting git to the schemes this remote may use: file only for an allowed local path."""
        local = self.url.startswith(("/", "file:"))
        return (*_ONLY_GIT_SCHEMES, "-c", "protocol.file.allow=always") if local else _ONLY_GIT_SCHEMES

    def __repr__(self) -> str:
        return f"Remote({strip_credentials(self.url)!r})"
