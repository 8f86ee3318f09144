"""The requirement's git workspace: write whole files, commit once per attempt, read back.

Plain git through subprocess, with a fixed author and no user config, so commits look the
same on every machine. Generated code is only written here, never imported or executed
by the worker: the sandbox runs it from a scratch copy.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from agents.schemas import SourceFile

AUTHOR = {"GIT_AUTHOR_NAME": "aiteam", "GIT_AUTHOR_EMAIL": "aiteam@localhost",
          "GIT_COMMITTER_NAME": "aiteam", "GIT_COMMITTER_EMAIL": "aiteam@localhost"}


def checked_target(root: Path, path: str) -> Path:
    """`path` under `root`, refused when it leaves the root, enters `.git` or passes through a symbolic link: a
    repository may track a link (tests/x.py -> ../../.git/config) that a written file would otherwise follow, and
    git would then run what that config names. Every existing component is checked with lstat."""
    parts = Path(path).parts
    if not parts or Path(path).is_absolute() or ".." in parts or ".git" in parts:
        raise WorkspaceError(f"{path} is outside the workspace or inside .git")
    for depth in range(1, len(parts) + 1):
        if root.joinpath(*parts[:depth]).is_symlink():
            raise WorkspaceError(f"{path}: {'/'.join(parts[:depth])} is a symbolic link; it is not written through")
    return root.joinpath(*parts)


def write_inside(root: Path, path: str, data: bytes) -> None:
    """Write `data` at `path` under `root` (checked_target), the file opened O_NOFOLLOW."""
    target = checked_target(root, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


class WorkspaceError(Exception):
    """The workspace refused an operation (a path outside it) or git failed."""


class GitError(WorkspaceError):
    """git itself failed; the message holds its output. Infrastructure to the failure classifier."""


class Workspace:
    def __init__(self, path: Path, branch: str) -> None:
        self.path, self.branch = Path(path), branch

    def ensure(self) -> Workspace:
        if not (self.path / ".git").is_dir():
            self.path.mkdir(parents=True, exist_ok=True)
            self._git("init", "-q", "-b", self.branch)
        return self

    def align(self, head: str | None) -> None:
        """Make the workspace hold commit `head`, the one the database records, undoing git work an interrupted
        apply left: a later commit whose transaction rolled back, files written but not committed, the lock files
        of a killed git (its lease expired long before anyone aligns, so that git has ended). `head` "" : no
        commit recorded, so any commit is a rolled-back one and the repository is re-created empty; also when it
        has no commit, because a first apply killed after `git add -A` leaves staged files that `git clean` keeps
        and the next commit would carry. None: not known (a requirement older than the record), so the commits
        stay and only uncommitted work is undone. The caller holds the requirement's lock, so no other writer's
        git command is running. A workspace already at `head` with nothing left over (the usual case) costs one
        git status, not a reset and a clean."""
        if not (self.path / ".git").is_dir():
            if head:
                raise GitError(f"the workspace {self.path} is missing; the database records commit {head}")
            if self.path.exists():  # files a wipe stopped half-way left (.git went first): none of them was committed
                shutil.rmtree(self.path)
            return
        for lock in ("index.lock", "HEAD.lock", f"refs/heads/{self.branch}.lock"):  # a killed git add or commit's
            (self.path / ".git" / lock).unlink(missing_ok=True)
        if head == "":
            shutil.rmtree(self.path)
            self.ensure()
            return
        commit, clean = self._status()
        if clean and head in (None, commit):
            return
        if head or commit:
            self._git("reset", "-q", "--hard", head or "HEAD")
        else:
            self._git("read-tree", "--empty")  # no commit to reset to: unstage what a killed first apply added
        self._git("clean", "-q", "-ffdx")

    def write(self, files: list[SourceFile]) -> None:
        for file in files:
            write_inside(self.path, file.path, file.content.encode("utf-8"))

    def commit(self, message: str) -> str:
        """Commit everything as one attempt and return the new HEAD. An attempt that changed
        nothing still gets its (empty) commit, so the log always matches the attempts."""
        self._git("add", "-A")
        self._git("commit", "-q", "--allow-empty", "-m", message)
        return self._git("rev-parse", "HEAD").strip()

    def head(self) -> str:
        """The HEAD commit, "" when there is none (no repository, or no commit yet)."""
        if not (self.path / ".git").is_dir():  # git would otherwise find a repository above the workspace
            return ""
        done = self._run("rev-parse", "--verify", "--quiet", "HEAD")
        return done.stdout.strip() if done.returncode == 0 else ""

    def log(self) -> list[tuple[str, str]]:
        """(sha, subject) of every commit, oldest first."""
        if not (self.path / ".git").is_dir():
            return []
        try:
            out = self._git("log", "--reverse", "--format=%H%x09%s")
        except WorkspaceError:
            return []  # no commit yet
        return [tuple(line.split("\t", 1)) for line in out.splitlines() if line]

    def files(self) -> list[SourceFile]:
        """The files of the aligned workspace: align leaves the index at HEAD, empty before the first commit."""
        if not (self.path / ".git").is_dir():  # git would otherwise list a repository above the workspace
            return []
        paths = [path for path in self._git("ls-files", "-z").split("\0") if path]  # unquoted, whatever the name
        return [SourceFile(path=p, content=(self.path / p).read_text(encoding="utf-8")) for p in sorted(paths)]

    def diff_summary(self, base: str = "", head: str = "HEAD") -> list[str]:
        """`A|M|D path (+added -removed)` from `base` (the empty tree when not given) to `head`; a rename or copy
        is `R|C new path`. Names as they are, not as git quotes them (`"m\\303\\263dulo.py"`)."""
        base = base or self._git("hash-object", "-t", "tree", "/dev/null").strip()
        # one diff for both, NUL-separated: --raw records (":modes shas STATUS", then the path, or the old and the
        # new path of a rename or copy) come first, then --numstat records ("added<tab>removed<tab>path", or
        # "added<tab>removed<tab>" then both paths)
        fields = self._git("diff", "--raw", "--numstat", "-z", "--text", base, head).split("\0")
        status, counts, at = {}, [], 0
        while at < len(fields) and fields[at]:
            paired = fields[at].startswith(":") and fields[at].rsplit(" ", 1)[1][0] in "RC"
            if fields[at].startswith(":"):
                status[fields[at + 1 + paired]] = fields[at].rsplit(" ", 1)[1][0]
                at += 2 + paired
                continue
            added, removed, path = fields[at].split("\t", 2)
            paired = not path
            counts.append((added, removed, fields[at + 2] if paired else path))
            at += 1 + 2 * paired
        return [f"{status.get(path, 'M')} {path} (+{added} -{removed})" for added, removed, path in counts]

    def _status(self) -> tuple[str, bool]:
        """HEAD's commit ("" before the first) and whether nothing is left that align would undo: no change, staged
        file, untracked or ignored file (git status), nor an empty directory (git clean removes those; git status
        does not show them)."""
        lines = self._git("status", "--porcelain=v2", "--branch", "--untracked-files=all", "--ignored").splitlines()
        oid = next(line.split()[2] for line in lines if line.startswith("# branch.oid "))
        clean = all(line.startswith("# ") for line in lines) and not _empty_directory_in(self.path)
        return ("" if oid == "(initial)" else oid), clean

    def _git(self, *args: str) -> str:
        done = self._run(*args)
        if done.returncode != 0:
            raise GitError(f"git {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        # No global config either: with HOME at the workspace, git would read a `.gitconfig` the repository (or the
        # model) wrote there as the user's own, and its core.hooksPath would run commands in the worker on commit.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.path), "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_CONFIG_GLOBAL": "/dev/null", "LANG": "C.UTF-8", **AUTHOR,
               "GIT_CEILING_DIRECTORIES": str(self.path.parent)}  # never a repository above the workspace
        return subprocess.run(["git", *args], cwd=self.path, env=env, capture_output=True, text=True,
                              errors="replace", timeout=60)  # a repository's file need not be UTF-8: its diff neither


def _empty_directory_in(root: Path) -> bool:
    """Whether a directory under `root` (outside .git) is empty: left by a write killed between mkdir and open."""
    for directory, subdirectories, names in os.walk(root):
        if directory == str(root):
            subdirectories.remove(".git")
        elif not subdirectories and not names:
            return True
    return False
