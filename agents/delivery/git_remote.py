"""Push a workspace branch to the project's git remote, and undo that push.

Plain git through subprocess with the workspace's fixed author and no user or system
config, like ``agents.workspace``. The remote is addressed by URL, never by a configured
remote name, so nothing is written into the workspace's .git/config (a URL there could
hold a token). Pushes name the exact commit and never force: a remote branch that moved
elsewhere is somebody's work, reported as an error, never overwritten. Undoing uses
``--force-with-lease`` on the commit we pushed, for the same reason.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from agents.delivery.errors import DeliveryError, strip_credentials
from agents.workspace import AUTHOR

GIT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class PushOutcome:
    branch: str
    commit: str  # the workspace branch's commit: what the remote branch points at once pushed
    previous: str | None  # what it pointed at before; None: the branch did not exist
    commits: list[tuple[str, str]] = field(default_factory=list)  # (sha, subject) beyond base, oldest first

    @property
    def already_there(self) -> bool:
        return self.previous == self.commit

    @property
    def created(self) -> bool:
        return self.previous is None


def push_branch(workspace: Path, branch: str, remote_url: str, *, base: str = "main") -> PushOutcome:
    """Make the remote's `branch` point at the workspace's `branch`; a no-op when it already does."""
    outcome = inspect_push(workspace, branch, remote_url, base=base)
    if not outcome.already_there:
        push_commit(workspace, branch, remote_url, outcome.commit)
    return outcome


def inspect_push(workspace: Path, branch: str, remote_url: str, *, base: str = "main") -> PushOutcome:
    """What push_branch would do, without doing it: lets a caller register the undo before the push happens."""
    commit = local_commit(workspace, branch)
    heads = remote_branches(workspace, remote_url)
    return PushOutcome(branch, commit, heads.get(branch), branch_commits(workspace, commit, heads.get(base)))


def push_commit(workspace: Path, branch: str, remote_url: str, commit: str) -> None:
    _push(workspace, remote_url, f"{commit}:refs/heads/{branch}")


def local_commit(workspace: Path, branch: str) -> str:
    try:
        return _git(workspace, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}").strip()
    except DeliveryError:
        raise DeliveryError(f"the workspace {workspace} has no branch {branch!r} with a commit") from None


def delete_branch(workspace: Path, branch: str, remote_url: str, *, expected: str) -> None:
    """Delete the remote branch if it still points at `expected` (the commit we pushed); gone already is fine."""
    if branch in remote_branches(workspace, remote_url):
        _push(workspace, remote_url, f":refs/heads/{branch}", lease=(branch, expected))


def restore_branch(workspace: Path, branch: str, remote_url: str, *, to: str, expected: str) -> None:
    """Move the remote branch back from `expected` (the commit we pushed) to `to` (where it was before us)."""
    if remote_branches(workspace, remote_url).get(branch) != to:
        _push(workspace, remote_url, f"{to}:refs/heads/{branch}", lease=(branch, expected))


def remote_branches(workspace: Path, remote_url: str) -> dict[str, str]:
    """{branch name: commit} of the remote's heads (`git ls-remote --heads`)."""
    out = _git(workspace, "ls-remote", "--heads", remote_url)
    pairs = (line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    return {ref.removeprefix("refs/heads/"): sha for sha, ref in pairs}


def branch_commits(workspace: Path, commit: str, base_commit: str | None) -> list[tuple[str, str]]:
    """(sha, subject) of the commits `commit` brings beyond `base_commit` (all of them when base is unknown here)."""
    exclude = ["--not", base_commit] if base_commit and _has_commit(workspace, base_commit) else []
    out = _git(workspace, "log", "--reverse", "--format=%H%x09%s", commit, *exclude)
    return [(sha, subject) for sha, _, subject in (line.partition("\t") for line in out.splitlines() if line)]


def ensure_bare_remote(path: Path) -> str:
    """A local bare repository to deliver to (the embedded default's remote); created on first use."""
    if not (path / "HEAD").exists():
        path.mkdir(parents=True, exist_ok=True)
        _git(path, "init", "-q", "--bare", str(path))
    return str(path)


def _has_commit(workspace: Path, sha: str) -> bool:
    try:
        _git(workspace, "cat-file", "-e", f"{sha}^{{commit}}")
    except DeliveryError:
        return False
    return True


def _push(workspace: Path, remote_url: str, refspec: str, *, lease: tuple[str, str] | None = None) -> None:
    options = [f"--force-with-lease=refs/heads/{lease[0]}:{lease[1]}"] if lease else []
    _git(workspace, "push", "--porcelain", *options, remote_url, refspec)


def _git(workspace: Path, *args: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workspace), "GIT_CONFIG_NOSYSTEM": "1",
        "LANG": "C.UTF-8", "GIT_TERMINAL_PROMPT": "0",  # a missing credential fails at once instead of waiting on a tty
        "GIT_SSH_COMMAND": "ssh -o BatchMode=yes", **AUTHOR,
    }
    if "SSH_AUTH_SOCK" in os.environ:  # an ssh agent is how production may reach an ssh remote
        env["SSH_AUTH_SOCK"] = os.environ["SSH_AUTH_SOCK"]
    try:
        done = subprocess.run(["git", *args], cwd=workspace, env=env, capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeliveryError(strip_credentials(f"git {args[0]}: {exc}")) from None
    if done.returncode != 0:
        # --porcelain reports rejected refs ("!" lines) on stdout, the reason for a failed connection on stderr.
        rejected = [line for line in done.stdout.splitlines() if line.startswith("!")]
        detail = "\n".join([*rejected, done.stderr.strip()]).strip() or f"exit code {done.returncode}"
        raise DeliveryError(strip_credentials(f"git {_describe(args)}: {detail}"))
    return done.stdout


def _describe(args: tuple[str, ...]) -> str:
    return " ".join(strip_credentials(a) for a in args)
