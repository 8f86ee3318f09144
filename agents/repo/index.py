"""Build the index of one commit, or load it from the cache that commit's SHA keys.

Cache format: one JSON file per (commit, format version, size limit) under the directory the caller gives,
`repo-index-v{FORMAT}-{sha}-{max_bytes}.json`, written to a temporary name and renamed, so a reader never sees half
a file and two workers indexing the same commit at once both end with a whole one. It holds the files, the
definitions (their search terms as one space-separated string, which loads faster than a list) and the names each
Python file uses; the links between files and the BM25 matrix are rebuilt from it when first used, being cheap next
to parsing. A file that does not read back (truncated, another version) is rebuilt over, never trusted.
Version 2: a file name that is not UTF-8 text, or holds a control character, is left out (files.py), and a NUL
byte anywhere makes a file binary; version 1 caches, which may hold such names, are not read.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path

from agents.repo.files import (
    MAX_FILE_BYTES,
    MAX_INDEX_BYTES,
    IndexTooLarge,
    RepoIndexError,
    Skipped,
    TreeEntry,
    read_blobs,
    resolve_commit,
    tree_entries,
)
from agents.repo.graph import Links, links_of
from agents.repo.search import SymbolSearch
from agents.repo.symbols import Symbol, parse_python

FORMAT = 2


@dataclass(frozen=True, slots=True)
class FileInfo:
    path: str
    size: int
    python: bool
    parsed: bool  # False for a Python file that does not parse: listed, but without definitions


@dataclass
class RepoIndex:
    sha: str
    files: list[FileInfo]
    symbols: list[Symbol]
    references: dict[str, dict[str, int]]  # path → name → how often the file uses it
    skipped: list[Skipped]
    from_cache: bool = field(default=False, compare=False)

    @cached_property
    def paths(self) -> frozenset[str]:
        return frozenset(f.path for f in self.files)

    @cached_property
    def symbols_by_path(self) -> dict[str, list[Symbol]]:
        grouped: dict[str, list[Symbol]] = {}
        for symbol in self.symbols:
            grouped.setdefault(symbol.path, []).append(symbol)
        return grouped

    @cached_property
    def definers(self) -> dict[str, frozenset[str]]:
        """Each defined name (class, function, method) → the files that define it."""
        found: dict[str, set[str]] = {}
        for symbol in self.symbols:
            found.setdefault(symbol.name, set()).add(symbol.path)
        return {name: frozenset(paths) for name, paths in found.items()}

    def files_note(self) -> str:
        """The commit's files in one line: how many the index holds, and how many it left out and why ("the
        repository has 9 files, 6 indexed, 3 left out: 2 binary, 1 name not UTF-8")."""
        counts = Counter(s.reason for s in self.skipped)
        total = len(self.files) + len(self.skipped)
        note = f"the repository has {total} file{'s' if total != 1 else ''}"
        if not counts:
            return f"{note}, all indexed"
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items(), key=lambda c: (-c[1], c[0])))
        return f"{note}, {len(self.files)} indexed, {len(self.skipped)} left out: {reasons}"

    @cached_property
    def links(self) -> Links:
        """Built on first use and kept: every map of this commit ranks over the same links."""
        return links_of(self)

    @cached_property
    def searcher(self) -> SymbolSearch:
        """Built on first use and never written to the cache: a map-only caller never pays for the BM25 matrix."""
        return SymbolSearch(self.symbols)


def index_repository(root: Path, cache_dir: Path, rev: str = "HEAD", max_file_bytes: int = MAX_FILE_BYTES,
                     max_total_bytes: int = MAX_INDEX_BYTES) -> RepoIndex:
    """The index of commit `rev` of the git repository at `root`: loaded when `cache_dir` has it, else built and
    stored there. IndexTooLarge when the commit's Python files hold more than max_total_bytes together."""
    for name, value in (("max_file_bytes", max_file_bytes), ("max_total_bytes", max_total_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} is a whole number of bytes above 0, not {value!r}")
    sha = resolve_commit(Path(root), rev)
    cache = Path(cache_dir) / f"repo-index-v{FORMAT}-{sha}-{max_file_bytes}.json"
    loaded = _load(cache, sha)
    if loaded is not None:
        return loaded
    index = build_index(Path(root), sha, max_file_bytes, max_total_bytes)
    _store(cache, index)
    return index


def build_index(root: Path, sha: str, max_file_bytes: int = MAX_FILE_BYTES,
                max_total_bytes: int = MAX_INDEX_BYTES) -> RepoIndex:
    entries, skipped = tree_entries(root, sha, max_file_bytes)
    # the sizes are the listing's: refused before a blob is read or parsed (what the index keeps of other text
    # is a path and a size)
    if sum(entry.size for entry in entries if _python(entry.path)) > max_total_bytes:
        raise IndexTooLarge(_too_large(sha, max_total_bytes, max_file_bytes))
    read: dict[TreeEntry, tuple[FileInfo | Skipped, tuple[list[Symbol], Counter[str]] | None]] = {}
    for entry, text, reason in read_blobs(root, entries):
        if text is None:
            read[entry] = Skipped(entry.path, reason), None
            continue
        python = _python(entry.path)
        parsed = parse_python(entry.path, text) if python else None
        read[entry] = FileInfo(entry.path, entry.size, python, parsed is not None), parsed
    files, symbols, references = [], [], {}
    for entry in entries:  # in the tree's order: read_blobs brings the paths of one blob together
        info, parsed = read[entry]
        if isinstance(info, Skipped):
            skipped.append(info)
            continue
        files.append(info)
        if parsed is not None:
            symbols += parsed[0]
            references[entry.path] = dict(parsed[1])
    return RepoIndex(sha, files, symbols, references, skipped)


def _python(path: str) -> bool:
    return path.endswith((".py", ".pyi"))


def _too_large(sha: str, limit: int, max_file_bytes: int) -> str:
    return (f"commit {sha[:12]} holds more than {limit // 1024**2} MiB of Python source (files up to "
            f"{max_file_bytes // 1024} KiB, a path counted each time it appears), more than aiteam indexes of one "
            "repository (AITEAM_REPO_INDEX_MAX_MB): the index keeps every definition and name, a few times the "
            "source's size in the worker's memory. An operator raises the limit if the worker has that memory")


def _store(cache: Path, index: RepoIndex) -> None:
    cache.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "sha": index.sha, "files": [asdict(f) for f in index.files],
               "symbols": [{**asdict(s), "terms": " ".join(s.terms)} for s in index.symbols], "references": index.references,
               "skipped": [asdict(s) for s in index.skipped]}
    fd, tmp = tempfile.mkstemp(dir=cache.parent, prefix=cache.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(payload, out, separators=(",", ":"))
        os.replace(tmp, cache)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _load(cache: Path, sha: str) -> RepoIndex | None:
    try:
        with cache.open(encoding="utf-8") as source:
            payload = json.load(source)
        if payload.get("format") != FORMAT or payload.get("sha") != sha:
            return None
        return RepoIndex(sha, [FileInfo(**f) for f in payload["files"]],
                         [Symbol(**{**s, "terms": tuple(s["terms"].split())}) for s in payload["symbols"]],
                         payload["references"],
                         [Skipped(**s) for s in payload["skipped"]], from_cache=True)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # truncated, hand-edited or from another version
        return None


__all__ = ["FileInfo", "IndexTooLarge", "RepoIndex", "RepoIndexError", "build_index", "index_repository"]
