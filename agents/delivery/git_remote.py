"""Push a workspace branch to the project's git remote, and undo that push.

Plain git through subprocess with the workspace's fixed author and no user or system
config, like ``agents.workspace``. The remote is addressed by URL, never by a configured
remote name, so nothing is written into the workspace's .git/config. Every git call that
names a remote checks it against the operator's rule first (``agents.delivery.remotes``),
puts ``--`` before it and allows git only the schemes that rule allows. git's ssh reads no ssh
configuration and uses no agent and no default key: only the key the operator bound to the
project's organization (``Remote.ssh_key``), so no tenant's remote is reached with another's key
or the worker's own (docs/adr/0043).

Pushes name the exact commit and never force: a remote branch that moved elsewhere is
somebody's work, reported as an error, never overwritten. Undoing uses
``--force-with-lease`` on the commit we pushed, for the same reason, and so does replacing our own
earlier push (a rework that reset the branch): only when the remote still holds what we pushed.

A host token (``HostAuth``) reaches git through its environment only (``agents.delivery.credentials``):
never in an argument, a URL or a config file, and scrubbed from every error message.
"""
from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from agents.delivery.credentials import HostAuth, git_env, scrub_auth
from agents.delivery.errors import DeliveryError, strip_credentials
from agents.delivery.remotes import Remote
from agents.workspace import AUTHOR

GIT_TIMEOUT_S = 120.0
# -F none: no ssh config file, user's or system's (a Host block's IdentityFile would add its key to ours), and
# no agent; IdentitiesOnly keeps ssh to the IdentityFile given (with none given it would try the default keys).
_SSH = "ssh -F none -o BatchMode=yes -o IdentityAgent=none -o IdentitiesOnly=yes"
NO_KEY_SSH = f"{_SSH} -o IdentityFile=none -o PubkeyAuthentication=no"  # a remote with no key: no key at all


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


def push_branch(workspace: Path, branch: str, remote: Remote, *, base: str = "main", auth: HostAuth | None = None,
                last_pushed: str | None = None) -> PushOutcome:
    """Make the remote's `branch` point at the workspace's `branch`; a no-op when it already does. `last_pushed`:
    the commit our previous delivery of this branch pushed, which this push may replace (see push_commit)."""
    outcome = inspect_push(workspace, branch, remote, base=base, auth=auth)
    if not outcome.already_there:
        push_commit(workspace, branch, remote, outcome.commit, auth=auth,
                    replacing=last_pushed if last_pushed and outcome.previous == last_pushed else None)
    return outcome


def inspect_push(workspace: Path, branch: str, remote: Remote, *, base: str = "main",
                 auth: HostAuth | None = None) -> PushOutcome:
    """What push_branch would do, without doing it: lets a caller register the undo before the push happens."""
    commit = local_commit(workspace, branch)
    heads = remote_branches(workspace, remote, auth=auth)
    return PushOutcome(branch, commit, heads.get(branch), branch_commits(workspace, commit, heads.get(base)))


def push_commit(workspace: Path, branch: str, remote: Remote, commit: str, *, auth: HostAuth | None = None,
                replacing: str | None = None) -> None:
    """Without `replacing`, a plain push: git refuses one that is not a fast-forward. With it (a commit we pushed
    before), the remote branch may be moved off it, but only while it still points there: a commit someone
    added since makes the lease fail, and the push is refused rather than dropping their work."""
    lease = (branch, replacing) if replacing else None
    _push(workspace, remote, f"{commit}:refs/heads/{branch}", lease=lease, auth=auth)


def local_commit(workspace: Path, branch: str) -> str:
    try:
        return _git(workspace, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}").strip()
    except DeliveryError:
        raise DeliveryError(f"the workspace {workspace} has no branch {branch!r} with a commit") from None


def delete_branch(workspace: Path, branch: str, remote: Remote, *, expected: str, auth: HostAuth | None = None) -> bool:
    """Delete the remote branch if it still points at `expected` (the commit we pushed); gone already is fine.
    False when there was nothing to undo (the saga then records nothing)."""
    if branch not in remote_branches(workspace, remote, auth=auth):
        return False
    _push(workspace, remote, f":refs/heads/{branch}", lease=(branch, expected), auth=auth)
    return True


def restore_branch(workspace: Path, branch: str, remote: Remote, *, to: str, expected: str,
                   auth: HostAuth | None = None) -> bool:
    """Move the remote branch back from `expected` (the commit we pushed) to `to` (where it was before us).
    False when it is there already: the push never landed, nothing to undo."""
    if remote_branches(workspace, remote, auth=auth).get(branch) == to:
        return False
    _push(workspace, remote, f"{to}:refs/heads/{branch}", lease=(branch, expected), auth=auth)
    return True


def remote_branches(workspace: Path, remote: Remote, *, auth: HostAuth | None = None) -> dict[str, str]:
    """{branch name: commit} of the remote's heads (`git ls-remote --heads`)."""
    out = remote_git(workspace, remote, ["ls-remote", "--heads"], auth=auth)
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


def _push(workspace: Path, remote: Remote, refspec: str, *, lease: tuple[str, str] | None = None,
          auth: HostAuth | None = None) -> None:
    options = [f"--force-with-lease=refs/heads/{lease[0]}:{lease[1]}"] if lease else []
    remote_git(workspace, remote, ["push", "--porcelain", *options], refspec, auth=auth)


def remote_git(cwd: Path, remote: Remote, command: list[str], *after: str, auth: HostAuth | None = None,
               timeout_s: float = GIT_TIMEOUT_S) -> str:
    """`git <command> -- <url> <after>` in `cwd`, once the remote passed the operator's rule, with only its schemes
    allowed and the token (if any) in the environment. The one way every module here talks to a remote."""
    url = remote.checked_url()  # raises RemoteRefused before git starts
    env = {**git_env(url, auth), "GIT_SSH_COMMAND": ssh_command(remote.ssh_key)}
    return _git(cwd, *command, "--", url, *after, config=remote.git_config(), env=env, auth=auth, timeout_s=timeout_s)


def ssh_command(key: Path | None) -> str:
    """git's ssh command line: with `key` (the project's organization's, its path checked by the remote's rule)
    as its only identity, or with no key at all."""
    return f"{_SSH} -o IdentityFile={shlex.quote(str(key))}" if key else NO_KEY_SSH


def _git(workspace: Path, *args: str, config: tuple[str, ...] = (), env: dict[str, str] | None = None,
         auth: HostAuth | None = None, timeout_s: float = GIT_TIMEOUT_S) -> str:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workspace), "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null", "LANG": "C.UTF-8",
        "GIT_TERMINAL_PROMPT": "0",  # a missing credential fails at once instead of waiting on a tty
        # no agent, no ssh config, no key: remote_git gives the remote's own organization's key where it has one
        "GIT_SSH_COMMAND": NO_KEY_SSH, **AUTHOR, **(env or {}),
    }
    try:
        done = subprocess.run(["git", *config, *args], cwd=workspace, env=env, capture_output=True, text=True,
                              timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeliveryError(scrub_auth(f"git {args[0]}: {exc}", auth)) from None
    if done.returncode != 0:
        # --porcelain reports rejected refs ("!" lines) on stdout, the reason for a failed connection on stderr.
        rejected = [line for line in done.stdout.splitlines() if line.startswith("!")]
        detail = "\n".join([*rejected, done.stderr.strip()]).strip() or f"exit code {done.returncode}"
        raise DeliveryError(scrub_auth(f"git {_describe(args)}: {detail}", auth))
    return done.stdout


def _describe(args: tuple[str, ...]) -> str:
    return " ".join(strip_credentials(a) for a in args)
