"""Workspace.align puts the git workspace back at the commit the database records, whatever an interrupted apply
left: a later commit, modified or untracked files, a killed git's index lock; with no recorded commit, an empty
repository; with an unknown one (older requirements), only what no commit holds."""
import shutil
import subprocess

import pytest

from agents.schemas import SourceFile
from agents.workspace import GitError, Workspace


def committed(tmp_path) -> tuple[Workspace, str]:
    workspace = Workspace(tmp_path / "ws", "aiteam/test").ensure()
    workspace.write([SourceFile(path="app.py", content="A = 1\n")])
    return workspace, workspace.commit("T1 (attempt 1)")


def test_align_undoes_a_later_commit_and_every_uncommitted_change(tmp_path):
    workspace, recorded = committed(tmp_path)
    workspace.write([SourceFile(path="app.py", content="A = 2\n"), SourceFile(path="extra.py", content="B = 1\n")])
    workspace.commit("T2 (attempt 1)")  # its transaction then rolled back
    workspace.write([SourceFile(path="app.py", content="A = 3\n"), SourceFile(path="pkg/half.py", content="x = ")])
    (workspace.path / ".git" / "index.lock").write_text("")
    workspace.align(recorded)
    assert workspace.head() == recorded and [s for _, s in workspace.log()] == ["T1 (attempt 1)"]
    assert workspace.files() == [SourceFile(path="app.py", content="A = 1\n")]
    assert not (workspace.path / "extra.py").exists() and not (workspace.path / "pkg").exists()
    workspace.write([SourceFile(path="app.py", content="A = 4\n")])
    assert workspace.commit("T2 (attempt 1)")  # the lock is gone: git works again


def test_align_to_no_recorded_commit_empties_the_repository(tmp_path):
    workspace, _ = committed(tmp_path)  # the first apply committed, then its transaction rolled back
    workspace.align("")
    assert workspace.log() == [] and workspace.files() == [] and (workspace.path / ".git").is_dir()


@pytest.mark.parametrize("head", ["", None], ids=["no commit recorded", "head unknown (older requirement)"])
def test_align_before_any_commit_unstages_what_a_failed_first_apply_added(tmp_path, head):
    """A first apply that died between `git add -A` and its commit leaves staged files, which `git clean` keeps;
    the next attempt's commit must not carry them."""
    workspace = Workspace(tmp_path / "ws", "aiteam/test").ensure()
    workspace.write([SourceFile(path="dead.py", content="x = 1\n")])
    subprocess.run(["git", "add", "-A"], cwd=workspace.path, check=True)
    workspace.align(head)
    workspace.write([SourceFile(path="app.py", content="A = 1\n")])
    workspace.commit("T1 (attempt 2)")
    tracked = subprocess.run(["git", "ls-files"], cwd=workspace.path, capture_output=True, text=True, check=True)
    assert tracked.stdout.splitlines() == ["app.py"] and not (workspace.path / "dead.py").exists()


@pytest.mark.parametrize("head", ["", None], ids=["no commit recorded", "head unknown (older requirement)"])
def test_files_left_without_their_git_directory_are_not_committed_by_the_next_first_apply(tmp_path, head):
    """Emptying a workspace is not atomic: a worker killed after `.git` went but before the files did leaves them
    behind; a first apply (align, then ensure) must not `git add` them into its commit."""
    workspace, _ = committed(tmp_path)
    (workspace.path / "evil.py").write_text("x = 1\n")
    shutil.rmtree(workspace.path / ".git")
    workspace.align(head)
    workspace.ensure().write([SourceFile(path="new.py", content="A = 1\n")])
    workspace.commit("T1 (attempt 2)")
    assert [f.path for f in workspace.files()] == ["new.py"]


def test_align_to_an_unknown_head_keeps_the_commits_and_undoes_the_rest(tmp_path):
    """None: a requirement older than the record; its commits are not the database's to judge, so they stay, and
    what no commit holds is undone."""
    workspace, head = committed(tmp_path)
    workspace.write([SourceFile(path="app.py", content="A = 2\n"), SourceFile(path="stray.py", content="x = ")])
    (workspace.path / ".git" / "index.lock").write_text("")
    workspace.align(None)
    assert workspace.head() == head and workspace.files() == [SourceFile(path="app.py", content="A = 1\n")]
    assert not (workspace.path / "stray.py").exists() and not (workspace.path / ".git" / "index.lock").exists()


def test_a_workspace_missing_its_recorded_commit_is_an_error_not_an_empty_tree(tmp_path):
    with pytest.raises(GitError, match="missing"):
        Workspace(tmp_path / "gone", "b").align("a" * 40)
    workspace, _ = committed(tmp_path)
    with pytest.raises(GitError):
        workspace.align("b" * 40)  # not a commit of this repository


def test_align_removes_the_locks_a_killed_commit_leaves_so_the_next_commit_succeeds(tmp_path):
    workspace, recorded = committed(tmp_path)
    for lock in ("HEAD.lock", f"refs/heads/{workspace.branch}.lock", "index.lock"):
        (workspace.path / ".git" / lock).parent.mkdir(parents=True, exist_ok=True)
        (workspace.path / ".git" / lock).write_text("")
    workspace.align(recorded)
    workspace.write([SourceFile(path="app.py", content="A = 2\n")])
    assert workspace.commit("T2 (attempt 1)") != recorded


def test_align_leaves_a_workspace_at_its_recorded_commit_as_it_is(tmp_path):
    workspace, recorded = committed(tmp_path)
    workspace.align(recorded)
    assert workspace.head() == recorded and workspace.files() == [SourceFile(path="app.py", content="A = 1\n")]
    Workspace(tmp_path / "none", "b").align("")  # no repository yet: nothing to do
    assert not (tmp_path / "none").exists()


def later_commit(workspace: Workspace) -> None:  # committed, then its transaction rolled back
    workspace.write([SourceFile(path="app.py", content="A = 2\n")])
    workspace.commit("T2 (attempt 1)")


def staged(workspace: Workspace) -> None:  # killed between `git add -A` and its commit
    workspace.write([SourceFile(path="new.py", content="B = 1\n")])
    subprocess.run(["git", "add", "-A"], cwd=workspace.path, check=True)


LEFT_OVER = {
    "a rolled-back commit ahead": later_commit,
    "a written file not committed": lambda w: w.write([SourceFile(path="app.py", content="A = 3\n")]),
    "a new file not committed": lambda w: w.write([SourceFile(path="pkg/half.py", content="x = ")]),
    "a staged file": staged,
    "an ignored file": lambda w: write_bytes(w.path / "__pycache__" / "app.cpython-312.pyc", b"\x00"),
    "an empty directory": lambda w: (w.path / "pkg" / "sub").mkdir(parents=True),
}


def write_bytes(path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.mark.parametrize("leave", LEFT_OVER.values(), ids=LEFT_OVER.keys())
def test_align_undoes_each_thing_an_interrupted_apply_leaves_alone(tmp_path, leave):
    """Each on its own, so that none hides behind another: align skips its reset and clean only when nothing is
    left over, and must see every one of these."""
    workspace = Workspace(tmp_path / "ws", "aiteam/test").ensure()
    workspace.write([SourceFile(path="app.py", content="A = 1\n")])
    write_bytes(workspace.path / ".gitignore", b"__pycache__/\n")  # so the .pyc below is ignored, not untracked
    recorded = workspace.commit("T1 (attempt 1)")
    leave(workspace)
    workspace.align(recorded)
    assert workspace.head() == recorded
    assert sorted(p.relative_to(workspace.path).as_posix() for p in workspace.path.iterdir()) == [".git", ".gitignore",
                                                                                                "app.py"]
    assert (workspace.path / "app.py").read_text() == "A = 1\n"
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--ignored"], cwd=workspace.path,
                            capture_output=True, text=True, check=True)
    assert status.stdout == ""  # nothing staged either


@pytest.mark.parametrize("head", ["recorded", None], ids=["recorded head", "head unknown"])
def test_a_clean_workspace_is_aligned_and_read_with_one_git_process_each(tmp_path, monkeypatch, head):
    workspace, recorded = committed(tmp_path)
    ran = []
    run = subprocess.run

    def counted(args, *rest, **kwargs):
        ran.append(args[1])
        return run(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "run", counted)
    workspace.align(recorded if head else None)
    assert ran == ["status"]
    assert workspace.files() == [SourceFile(path="app.py", content="A = 1\n")] and ran == ["status", "ls-files"]


def test_head_is_empty_without_a_commit_and_never_reads_a_repository_above(tmp_path):
    outer, _ = committed(tmp_path)  # a repository around the next workspace's directory
    inner = outer.path / "nested"
    inner.mkdir()
    assert Workspace(inner, "b").head() == ""  # no .git of its own: not the outer repository's HEAD
    assert Workspace(tmp_path / "fresh", "b").ensure().head() == ""


def test_diff_summary_gives_status_and_line_counts_of_each_change_since_the_base(tmp_path):
    workspace, first = committed(tmp_path)
    workspace.write([SourceFile(path="app.py", content="A = 1\nB = 2\n"), SourceFile(path="pkg/new.py", content="x = 1\n")])
    workspace.commit("T2 (attempt 1)")
    (workspace.path / "app.py").unlink()
    workspace.commit("T3 (attempt 1)")
    assert workspace.diff_summary(first) == ["D app.py (+0 -1)", "A pkg/new.py (+1 -0)"]
    assert workspace.diff_summary() == ["A pkg/new.py (+1 -0)"]  # since the empty tree
    second = workspace.log()[1][0]  # up to a given commit, though HEAD is past it (a rolled-back apply's commit)
    assert workspace.diff_summary(first, second) == ["M app.py (+1 -0)", "A pkg/new.py (+1 -0)"]
