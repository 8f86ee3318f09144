"""A cached bare copy of a project's repository, one per project, that requirements branch from.

    mirror = Mirror(var_dir / "mirrors" / f"{project_id}.git", remote, auth)   # remote: agents.delivery.Remote
    with mirror.locked():
        sha = mirror.sync(base="main")      # fetch (the first time: create), return the base branch's commit

The first sync creates a bare repository and every sync fetches the remote's branches and tags into it by URL
(`git fetch --prune -- <url> +refs/heads/*:refs/heads/* +refs/tags/*:refs/tags/*`): the same as
`git clone --mirror` then `git fetch`, without storing the URL as a configured remote (a changed `repo_url` is
simply fetched next time) and without the host's other refs (GitHub's `refs/pull/*`, one per pull request ever
opened). Every call to the remote goes through `agents.delivery.git_remote.remote_git`: the operator's rule
checked first, `--` before the URL, only the rule's schemes allowed, no ssh agent, the token in the environment.

One lock file per mirror (`<mirror>.lock`, `flock`) serialises everything that writes it, across threads and
worker processes on one machine: a fetch, and a workspace cloned from it (`agents.repo.workspace`) so that it
never copies refs half-updated. Holding it is the caller's job (`locked()`), so that sync and clone happen under
one hold.
"""
from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agents.delivery.credentials import HostAuth
from agents.delivery.errors import DeliveryError
from agents.delivery.git_remote import remote_git
from agents.delivery.remotes import Remote
from agents.repo.files import SHA_RE, RepoIndexError, git
from agents.repo.refs import checked_branch

LOCK_TIMEOUT_S = 600.0  # a fetch of a large repository over a slow link; after that, something is stuck
FETCH_TIMEOUT_S = 900.0
# git asks for a user name once the host refused what it sent: there is no prompt, so the token is missing or wrong
_NO_ACCESS = " (the host refused access: the project's token variable is unset, wrong or lacks read access)"
REFSPECS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")


class MirrorError(Exception):
    """The mirror could not be brought up to date or has no such branch; the message is safe to store and show."""


class Mirror:
    def __init__(self, path: Path, remote: Remote, auth: HostAuth | None = None) -> None:
        self.path, self.remote, self.auth = Path(path), remote, auth
        self._held = False

    @contextmanager
    def locked(self, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[Mirror]:
        """Hold the mirror's lock file; a second holder (thread or process) waits, up to `timeout_s`. Held already
        by this object (a caller that syncs, then opens a workspace inside one hold): held on, not waited for."""
        if self._held:
            yield self
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _acquire(fd, timeout_s, self.path)
            self._held = True
            yield self
        finally:
            self._held = False
            os.close(fd)  # closing the descriptor releases the flock

    @property
    def held(self) -> bool:
        return self._held

    def sync(self, base: str) -> str:
        """Fetch the remote into the mirror (creating it the first time) and return `base`'s commit."""
        self._require_lock()
        checked_branch(base)
        try:
            if not (self.path / "HEAD").is_file():  # --template= : no sample hooks
                git(self.path.parent, "init", "-q", "--bare", "--template=", str(self.path))
        except RepoIndexError as exc:
            raise MirrorError(f"creating the mirror failed: {exc}") from None
        try:
            remote_git(self.path, self.remote, ["fetch", "-q", "--prune", "--no-tags"], *REFSPECS, auth=self.auth,
                       timeout_s=FETCH_TIMEOUT_S)
        except DeliveryError as exc:  # already scrubbed of the token and of credentialed URLs
            hint = _NO_ACCESS if "could not read Username" in str(exc) else ""
            raise MirrorError(f"fetching the repository failed{hint}: {exc}") from None
        return self.commit_of(base)

    def commit_of(self, branch: str) -> str:
        """The commit `branch` points at in the mirror, as last fetched."""
        checked_branch(branch)
        try:
            sha = git(self.path, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}").decode().strip()
        except RepoIndexError:
            sha = ""
        if not SHA_RE.fullmatch(sha):
            raise MirrorError(f"the repository has no branch {branch!r}") from None
        return sha

    def _require_lock(self) -> None:
        if not self._held:
            raise RuntimeError("hold the mirror's lock (`with mirror.locked():`) around a sync or a clone")


def _acquire(fd: int, timeout_s: float, path: Path) -> None:
    """flock, polled, so a stuck holder turns into an error instead of a worker that waits forever."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise MirrorError(f"the mirror {path.name} stayed locked for over {timeout_s:.0f} s") from None
            time.sleep(0.05)
