"""A commit's tree written to a directory, for the runs at the base commit (docs/adr/0035).

git writes it: a temporary index read from the commit, checked out into the directory as its work tree. No archive
is extracted here: git makes every directory itself and never writes through a symbolic link, whatever the tree
holds (a tree built with `git mktree` can hold a link and a directory of the same name, which let an extraction
checked by tarfile's data filter write outside its destination). The files are the commit's, as a checkout of it
gives them: `.gitattributes`' export-ignore and export-subst, which are `git archive`'s, drop and rewrite nothing,
and its checkout attributes (eol, ident) are the commit's own, as in the workspace's checkout of the branch.
"""
from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from agents.repo.files import git

_MAX_LINKS = 40  # as many as Linux follows in one path


def export_commit(repository: Path, sha: str, dest: Path, files: Mapping[str, bytes] | None = None, *,
                  skipped: list[str] | None = None) -> Path:
    """The tree of commit `sha` of the git repository at `repository`, written to dest (no .git), with `files`
    (relative path → bytes) laid over it: the base commit plus QC's reproduction tests. A symbolic link that leads
    out of the tree (absolute, or up past its root, itself or through another link) is removed, its path added to
    `skipped`: the tests would read or write outside the tree through it."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="export-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index"), "GIT_WORK_TREE": str(dest.absolute())}
        git(repository, "read-tree", sha, env=env)
        git(repository, "checkout-index", "--all", env=env)
        listing = git(repository, "ls-files", "--stage", "-z", env=env)
    links = [os.fsdecode(record.partition(b"\t")[2]) for record in listing.split(b"\0") if record.startswith(b"120000 ")]
    out = [link for link in links if inside(dest, link) is None]  # all judged before any is removed
    for link in out:
        (dest / link).unlink()
    if skipped is not None:
        skipped.extend(out)
    for path, data in (files or {}).items():
        where = inside(dest, path)
        if where is None:
            raise ValueError(f"{path} is outside the checkout")
        (dest / where).parent.mkdir(parents=True, exist_ok=True)
        (dest / where).write_bytes(data)
    return dest


def inside(root: Path, path: str) -> str | None:
    """Where `path` (relative to root) leads, following the links on disk, as a path relative to root; None when it
    leads out of root (an absolute link, `..` past root), loops, or cannot be looked at. Resolved one component at
    a time with lstat, never with realpath, which stops resolving, unchecked, at a path longer than PATH_MAX."""
    if path.startswith("/"):
        return None
    done: list[str] = []
    todo = path.split("/")[::-1]
    followed = 0
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not done:
                return None
            done.pop()
            continue
        try:
            mode = os.lstat(root.joinpath(*done, part)).st_mode
        except FileNotFoundError:  # nothing there yet: what follows is a path to make, read as written
            mode = 0
        except OSError:  # a file taken for a directory, a name too long
            return None
        if not stat.S_ISLNK(mode):
            done.append(part)
            continue
        followed += 1
        target = os.readlink(root.joinpath(*done, part))
        if followed > _MAX_LINKS or target.startswith("/"):
            return None
        todo.extend(target.split("/")[::-1])
    return "/".join(done)
