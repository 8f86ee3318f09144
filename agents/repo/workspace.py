"""A requirement's workspace on an existing repository: a clone of the project's mirror on its own branch.

    workspace = RepoWorkspace.open(mirror, root / str(requirement_id), branch=branch_name(key, title), base="main")
    record(workspace.base_sha)                      # the base branch's commit at intake; pass it back on re-runs
    workspace.align(recorded_head)                  # "" : no attempt committed yet, back to the base commit
    applied = workspace.apply(answer)               # agents.edits: search/replace blocks, new files, deletions
    if applied.ok:
        recorded_head = workspace.commit("T1 (attempt 1)")
    change = workspace.change()                     # unified diff from the merge base and its scope measure

The same method names as the greenfield `agents.workspace.Workspace` (ensure, align, commit, head, log, files,
diff_summary), so the lifecycle's steps work on either; here the history starts at the base commit, not empty.

A clone, not a `git worktree` of the mirror: the mirror's fetch prunes and force-updates every `refs/heads/*` to
the remote's, which would move or delete a worktree's branch living there; a clone's refs are its own. A local
clone hard-links the mirror's objects (immutable, so safe to share, and cheap), without `--shared`, so a later
`gc` of the mirror cannot take objects the workspace still needs. The clone keeps no remote: delivery pushes to
the project's URL (`agents.delivery.git_remote`), and nothing in `.git/config` names the mirror or a host.
"""
from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agents.edits import Answer, Applied, Files, apply_edits, named_paths, read_files
from agents.repo.files import RepoIndexError, git, usable_path
from agents.repo.mirror import Mirror
from agents.repo.refs import checked_branch
from agents.repo.scope import Scope, measure
from agents.schemas import SourceFile
from agents.workspace import GitError, Workspace, WorkspaceError, checked_target, write_inside


@dataclass(frozen=True)
class Change:
    merge_base: str
    head: str
    diff: str  # git's unified diff, merge base to head, renames as delete and add
    scope: Scope


class RepoWorkspace(Workspace):
    def __init__(self, path: Path, branch: str, base_sha: str) -> None:
        super().__init__(path, checked_branch(branch))
        self.base_sha = base_sha

    @classmethod
    def open(cls, mirror: Mirror, path: Path, *, branch: str, base: str, base_sha: str = "") -> RepoWorkspace:
        """The workspace at `path`, cloned from the mirror if it is not there whole. Without `base_sha` (at
        intake) the mirror is fetched and the base branch's commit now is the base; with it (a re-run), that
        commit is, fetched only when the mirror lacks it."""
        with mirror.locked():
            base_sha = base_sha or mirror.sync(base)
            workspace = cls(path, branch, base_sha)
            if not workspace._complete():
                if not _has_commit(mirror.path, base_sha):
                    mirror.sync(base)
                workspace._clone(mirror.path)
        return workspace

    def ensure(self) -> RepoWorkspace:
        if not self._complete():
            raise GitError(f"the workspace {self.path} is missing or half made: open it from the mirror again")
        return self

    def align(self, head: str | None) -> None:
        """Make the workspace hold `head`, the commit the database records ("": none yet, so the base commit;
        None: not known, so the branch's own), undoing any commit and file a rolled-back apply left."""
        self.ensure()
        (self.path / ".git" / "index.lock").unlink(missing_ok=True)  # a killed git's; the caller holds the lock
        self._git("checkout", "-q", "-f", "-B", self.branch, head or (self.base_sha if head == "" else self.branch))
        self._git("clean", "-q", "-ffdx")

    def current_files(self, paths: Sequence[str]) -> Files:
        """The files at `paths` as they stand (agents.edits.CurrentFiles), so an answer is checked while it is
        validated and a block that does not apply goes back to the model."""
        return read_files(self.path, paths)

    def apply(self, answer: Answer) -> Applied:
        """Apply an engineer's edits to the files on disk, all or none; the caller commits."""
        applied = apply_edits(self.current_files(named_paths(answer)), answer)
        if applied.ok:
            for path, data in applied.changed.items():
                write_inside(self.path, path, data)  # bytes as apply_edits made them: line endings kept
            for path in applied.deleted:
                checked_target(self.path, path).unlink()
        return applied

    def log(self) -> list[tuple[str, str]]:
        """(sha, subject) of the commits this requirement made, oldest first: the repository's own history is not
        the attempts' log."""
        out = self._git("log", "--reverse", "--format=%H%x09%s", f"{self.base_sha}..HEAD")
        return [tuple(line.split("\t", 1)) for line in out.splitlines() if line]

    def files(self) -> list[SourceFile]:
        """The text files this requirement added or changed (not the whole repository), whole: the repository's own
        files are not model output, so neither SourceFile's size limit nor its path rule applies (a role's context
        is cut to its budget elsewhere, lifecycle/repo_contexts.py)."""
        found = read_files(self.path, self.changed_paths())
        return [SourceFile.model_construct(path=p, content=data.decode("utf-8", "replace"))
                for p, data in sorted(found.items()) if isinstance(data, bytes)]

    def changed_paths(self) -> list[str]:
        """The files this requirement added or changed, from the merge base, as git names them (-z: a name git
        would quote, `"m\\303\\263dulo.py"`, is no path). A name that cannot travel as text (not UTF-8, a control
        character: agents/repo/files.py) is left out: no edit of ours makes one (agents.edits.path_problem)."""
        try:
            out = git(self.path, "diff", "--name-only", "-z", "--no-renames", "--diff-filter=d", self.merge_base(),
                      "HEAD")
        except RepoIndexError as exc:
            raise GitError(str(exc)) from None
        paths = (path for path in out.decode("utf-8", "surrogateescape").split("\0") if path)
        return [path for path in paths if usable_path(path)]

    def head(self) -> str:
        """HEAD's commit: the base commit until the first attempt commits (the greenfield one is "" then)."""
        return self._git("rev-parse", "HEAD").strip()

    def merge_base(self) -> str:
        return self._git("merge-base", self.base_sha, "HEAD").strip()

    def diff(self) -> str:
        # --text: a .gitattributes of the repository's marking files -diff or binary must not hide their lines
        # from the scope guard and the reviewer
        return self._git("diff", "--text", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames",
                         "--src-prefix=a/", "--dst-prefix=b/", self.merge_base(), "HEAD")

    def change(self) -> Change:
        """The committed change from the merge base: what a pull request would show, and its scope measure."""
        diff = self.diff()
        return Change(merge_base=self.merge_base(), head=self.head(), diff=diff, scope=measure(diff))

    def diff_summary(self, base: str = "", head: str = "HEAD") -> list[str]:
        return super().diff_summary(base or self.merge_base(), head)

    def _complete(self) -> bool:
        if not (self.path / ".git").is_dir():
            return False
        try:  # the branch is made last: a clone killed before it is half made
            self._git("rev-parse", "--verify", "--quiet", f"refs/heads/{self.branch}^{{commit}}")
        except WorkspaceError:
            return False
        return True

    def _clone(self, mirror: Path) -> None:
        if self.path.exists():
            shutil.rmtree(self.path)  # a clone a killed worker left half made
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:  # --template= : no sample hooks; objects hard-linked from the mirror's, not shared with it
            git(self.path.parent, "clone", "-q", "--no-checkout", "--template=", "--", str(mirror), str(self.path))
        except RepoIndexError as exc:
            raise GitError(str(exc)) from None
        self._git("remote", "remove", "origin")
        self._git("checkout", "-q", "-f", "-B", self.branch, self.base_sha)


def _has_commit(repository: Path, sha: str) -> bool:
    try:
        git(repository, "cat-file", "-e", f"{sha}^{{commit}}")
    except RepoIndexError:
        return False
    return True

