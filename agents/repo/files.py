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
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

MAX_FILE_BYTES = 512 * 1024
# The Python source one commit's index parses, all files together (a path counted each time it appears): the index
# keeps each file's definitions and the names it uses, a few times the source's size in memory and in its cache.
MAX_INDEX_BYTES = 256 * 1024 * 1024
SHA_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
GIT_TIMEOUT_SECONDS = 300
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # and what str.splitlines() breaks on


class RepoIndexError(Exception):
    """The repository cannot be indexed (not a git repository, no such commit, git failed)."""


class IndexTooLarge(RepoIndexError):
    """The commit holds more Python source than the index parses: the repository as it stands, for a person."""


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
    """(entry, text, "") for text files, (entry, None, reason) for binary or undecodable ones, from one git process
    read as it streams: one blob in memory at a time, each read once however many paths hold it (their entries
    come together, in the order of the first). A NUL byte anywhere means binary (git looks at the first 8,000
    bytes only): a text holding one could reach no prompt's record (PostgreSQL's JSON refuses \\u0000)."""
    holders: dict[str, list[TreeEntry]] = {}
    for entry in entries:
        holders.setdefault(entry.blob, []).append(entry)
    for blob, data in cat_blobs(root, list(holders)):
        text, reason = _text(data)
        for entry in holders[blob]:
            yield entry, text, reason


def _text(data: bytes) -> tuple[str | None, str]:
    if b"\0" in data:
        return None, "binary"
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError:
        return None, NOT_UTF8


def cat_blobs(root: Path, blobs: list[str]) -> Iterator[tuple[str, bytes]]:
    """(id, bytes) of each blob, in order, from `git cat-file --batch` read object by object as it writes them
    (a thread writes the ids, so neither side waits on a full pipe)."""
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(["git", "-C", str(root), "cat-file", "--batch", "--buffer"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=errors, env=git_env())
        assert process.stdin is not None and process.stdout is not None
        writer = threading.Thread(target=_write_ids, args=(process.stdin, blobs), daemon=True)
        writer.start()
        try:
            for blob in blobs:
                yield blob, _object(process.stdout, blob, errors)
        finally:
            process.kill()  # a reader that stopped early leaves git blocked on its output
            writer.join()
            process.stdout.close()
            process.wait()


def _write_ids(stdin: IO[bytes], blobs: list[str]) -> None:
    try:
        for blob in blobs:
            stdin.write(f"{blob}\n".encode())
        stdin.flush()
    except BrokenPipeError:  # git gone: killed by the reader's cleanup, or failed (the reader says why)
        pass
    finally:
        try:
            stdin.close()
        except BrokenPipeError:
            pass


def _object(out: IO[bytes], blob: str, errors: IO[bytes]) -> bytes:
    header = out.readline().split()
    if len(header) != 3 or header[0].decode(errors="replace") != blob or header[1] != b"blob":
        errors.seek(0)
        said = b" ".join(header).decode(errors="replace") or errors.read().decode(errors="replace").strip()
        raise RepoIndexError(f"git cat-file did not give blob {blob}: {said or 'no output'}")
    size = int(header[2])
    data = out.read(size + 1)  # the content, then a newline
    if len(data) != size + 1:
        raise RepoIndexError(f"git cat-file stopped in the middle of blob {blob}")
    return data[:size]
