"""Read the files an answer names from a working tree, without following a symbolic link out of it."""
from __future__ import annotations

import stat
from collections.abc import Iterable
from pathlib import Path

from agents.edits.text import MAX_FILE_BYTES, Unreadable, path_problem


def read_files(root: Path, paths: Iterable[str]) -> dict[str, bytes | Unreadable]:
    """The files at `paths` under `root` as `apply_edits` takes them: bytes for a regular file, Unreadable for
    what exists but is no regular file (or is under a symbolic link), nothing for what does not exist. Unsafe
    paths are left out: `apply_edits` refuses them by name."""
    found: dict[str, bytes | Unreadable] = {}
    for path in paths:
        if path_problem(path) is None and (entry := _read(root, path)) is not None:
            found[path] = entry
    return found


def _read(root: Path, path: str) -> bytes | Unreadable | None:
    parts = path.split("/")
    for depth in range(1, len(parts) + 1):  # lstat each component: a link anywhere could point outside the root
        try:
            mode = root.joinpath(*parts[:depth]).lstat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISLNK(mode):
            return Unreadable("a symbolic link" if depth == len(parts) else "under a symbolic link")
    if not stat.S_ISREG(mode):
        return Unreadable("a directory" if stat.S_ISDIR(mode) else "not a regular file")
    with root.joinpath(path).open("rb") as handle:
        return handle.read(MAX_FILE_BYTES + 1)  # one byte over is enough to refuse it as too large
