"""The files of one commit, read from git's object store rather than the working tree.

Reading blobs of a named commit (`git ls-tree` then `git cat-file --batch`) means the index describes exactly the
commit its cache is keyed by, even when the checkout is dirty, and no path is ever opened on disk: a symlink is a
blob holding its target (skipped), so nothing outside the repository can be reached through one.

A path is text everywhere after this module: in the map and the search hits a prompt carries, in the records a
database keeps (PostgreSQL's text refuses NUL and lone surrogates), in logs. git's paths are bytes, so a name that
is not UTF-8, or that holds a control character (a newline would forge a line of the map), is left out here with
its reason, shown escaped (`caf\\xe9.py`), never carried on as a surrogate-escaped string that fails the first
time it is encoded. The file is still in the repository: only the index does not offer it.
"""
from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 512 * 1024
SHA_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
GIT_TIMEOUT_SECONDS = 300
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # and what str.splitlines() breaks on


class RepoIndexError(Exception):
    """The repository cannot be indexed (not a git repository, no such commit, git failed)."""


@dataclass(frozen=True, slots=True)
class TreeEntry:
    path: str
    blob: str
    size: int


@dataclass(frozen=True, slots=True)
class Skipped:
    path: str
    reason: str  # one of REASONS; `path` is git's, or for an unusable name that name escaped (caf\\xe9.py)


# Why a file is left out, worded for the map's note ("3 binary, 1 too large").
NOT_UTF8 = "text not UTF-8"
NAME_NOT_UTF8 = "name not UTF-8"
NAME_WITH_CONTROL = "name with a control character"
REASONS = ("binary", "too large", "symlink", "submodule", NOT_UTF8, NAME_NOT_UTF8, NAME_WITH_CONTROL)


def git(root: Path, *args: str, stdin: bytes | None = None, env: Mapping[str, str] | None = None) -> bytes:
    """git with no user or system configuration and none of the caller's GIT_* variables (a GIT_DIR in the worker's
    environment would point every command at another repository); `env`: the variables this call sets itself."""
    try:
        result = subprocess.run(["git", "-C", str(root), *args], input=stdin, capture_output=True,
                                env={**git_env(), **(env or {})}, check=False, timeout=GIT_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        raise RepoIndexError(f"git {args[0]} took over {GIT_TIMEOUT_SECONDS} s in {root}") from None
    if result.returncode != 0:
        raise RepoIndexError(f"git {args[0]} failed in {root}: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def git_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0"}


def resolve_commit(root: Path, rev: str = "HEAD") -> str:
    """The full SHA of `rev`; the cache key, so a branch name that moves never serves a stale index."""
    if not Path(root).is_dir():
        raise RepoIndexError(f"{root} is not a directory")
    if rev.startswith("-"):
        raise RepoIndexError(f"{rev!r} is not a revision")
    try:
        sha = git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    except RepoIndexError as error:  # --quiet leaves stderr empty for a missing commit, not for a missing repository
        raise RepoIndexError(f"{rev!r} does not name a commit in {root}: {error}") from None
    if not SHA_RE.fullmatch(sha):
        raise RepoIndexError(f"{rev!r} does not name a commit in {root}")
    return sha


def tree_entries(root: Path, sha: str, max_bytes: int = MAX_FILE_BYTES) -> tuple[list[TreeEntry], list[Skipped]]:
    """Every file of the commit's tree: the ones worth reading, and the rest with the reason they were left out."""
    kept, skipped = [], []
    listing = git(root, "ls-tree", "-r", "-l", "-z", "--full-tree", sha)
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, kind, blob, size = meta.decode().split()
        path, unusable = path_text(raw_path)
        if unusable:
            skipped.append(Skipped(path, unusable))
        elif kind == "commit":
            skipped.append(Skipped(path, "submodule"))
        elif mode == "120000":
            skipped.append(Skipped(path, "symlink"))
        elif int(size) > max_bytes:
            skipped.append(Skipped(path, "too large"))
        else:
            kept.append(TreeEntry(path, blob, int(size)))
    return kept, skipped


def path_text(raw: bytes) -> tuple[str, str]:
    """(the path as text, "") when it can travel as text; else (the path shown escaped, why it is left out)."""
    try:
        path, reason = raw.decode("utf-8"), ""
    except UnicodeDecodeError:
        path, reason = raw.decode("utf-8", errors="backslashreplace"), NAME_NOT_UTF8
    if CONTROL_RE.search(path):
        path, reason = CONTROL_RE.sub(lambda m: f"\\x{ord(m[0]):02x}", path), reason or NAME_WITH_CONTROL
    return path, reason


def usable_path(path: str) -> bool:
    """Whether a path (decoded by the caller) can travel as text: no surrogate escapes, no control character."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not CONTROL_RE.search(path)


def read_blobs(root: Path, entries: list[TreeEntry]) -> Iterator[tuple[TreeEntry, str | None, str]]:
    """(entry, text, "") for text files, (entry, None, reason) for binary or undecodable ones, in one git process.
    A NUL byte anywhere means binary (git looks at the first 8,000 bytes only): a text holding one could reach no
    prompt's record (PostgreSQL's JSON refuses \\u0000)."""
    request = b"".join(f"{entry.blob}\n".encode() for entry in entries)
    out = git(root, "cat-file", "--batch", stdin=request)
    at = 0
    for entry in entries:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        data = out[header_end + 1: header_end + 1 + size]
        at = header_end + 1 + size + 1  # the content is followed by a newline
        if b"\0" in data:
            yield entry, None, "binary"
            continue
        try:
            yield entry, data.decode("utf-8"), ""
        except UnicodeDecodeError:
            yield entry, None, NOT_UTF8
