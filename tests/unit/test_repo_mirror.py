"""A requirement on an existing repository works on a branch of it: the project's mirror is fetched (safely by two
workers at once), the workspace branches from the base commit at intake, edits keep every other byte, and the
delivered branch shares its history with main. Real git throughout, on a src-layout repository with history."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agents.delivery import DeliveryPlan, Remote, deliver
from agents.repo.mirror import Mirror, MirrorError
from agents.repo.refs import BranchRefused, branch_name, checked_branch
from agents.repo.workspace import RepoWorkspace
from agents.schemas.edits import EditsOutput
from agents.workspace import GitError
from tests.repo_history import COMMITS, git, make_project


def edit(path: str, search: str, replace: str, **more: object) -> EditsOutput:
    return EditsOutput(reasoning="the ticket's fix", edits=[{"path": path, "search": search, "replace": replace}],
                       **more)


ROUNDING = edit("src/shop/cart.py", "    return round(sum(prices), 2)\n", "    return round(sum(prices), 2) or 0\n",
                files=[{"path": "tests/test_rounding.py", "content": "def test_rounding():\n    assert True\n"}])


@pytest.fixture
def project(tmp_path):
    return make_project(tmp_path)


def test_the_workspace_branches_from_main_at_intake_and_records_its_commit(project, tmp_path):
    workspace = project.workspace(tmp_path)
    assert workspace.base_sha == project.main() and workspace.head() == project.main()
    assert workspace.branch == "aiteam/42-fix-the-total"
    assert git(workspace.path, "symbolic-ref", "HEAD").strip() == "refs/heads/aiteam/42-fix-the-total"
    history = git(workspace.path, "log", "--format=%s", "HEAD").splitlines()
    assert history == [message for message, _ in reversed(COMMITS)]  # the repository's own history, all of it
    assert workspace.log() == []  # and no attempt yet
    assert "[remote" not in (workspace.path / ".git" / "config").read_text()  # nothing names the mirror or a host


def test_the_delivered_branch_shares_history_with_main_and_leaves_other_files_untouched(project, tmp_path):
    workspace = project.workspace(tmp_path)
    assert workspace.apply(ROUNDING).ok
    head = workspace.commit("T1 (attempt 1)")
    result = deliver(DeliveryPlan(workspace=workspace.path, branch=workspace.branch, remote=project.remote))
    assert result.succeeded, result.error
    assert result.pushed_commits == [(head, "T1 (attempt 1)")]  # only the attempt: main's history is already there
    branch = workspace.branch
    assert git(project.origin, "merge-base", "main", branch).strip() == workspace.base_sha
    changed = git(project.origin, "diff", "--name-only", "main", branch).split()
    assert changed == ["src/shop/cart.py", "tests/test_rounding.py"]
    for path in ("pyproject.toml", "src/shop/discount.py", "docs/windows.txt", "assets/logo.bin", "tests/test_cart.py"):
        assert project.blob(branch, path) == project.blob("main", path)
        assert (workspace.path / path).read_bytes() == project.blob("main", path)  # CRLF and binary bytes as they were


def test_an_edited_crlf_file_keeps_its_line_endings(project, tmp_path):
    workspace = project.workspace(tmp_path)
    assert workspace.apply(edit("docs/windows.txt", "line two\n", "line 2\nline 2.5\n")).ok
    workspace.commit("T1 (attempt 1)")
    assert project.blob("main", "docs/windows.txt") == b"line one\r\nline two\r\nline three\r\n"
    assert (workspace.path / "docs/windows.txt").read_bytes() == b"line one\r\nline 2\r\nline 2.5\r\nline three\r\n"
    assert workspace.change().scope.lines_changed == 3  # one removed, two added: no line rewritten for its ending


def test_the_change_is_measured_from_the_merge_base(project, tmp_path):
    workspace = project.workspace(tmp_path)
    workspace.apply(ROUNDING)
    workspace.commit("T1 (attempt 1)")
    project.advance_main("Someone else's work", {"src/shop/other.py": b"X = 1\n" * 50})  # not part of our change
    change = workspace.change()
    assert change.merge_base == workspace.base_sha and change.head == workspace.head()
    assert change.scope.modules == ("shop", "tests") and change.scope.lines_changed == 4
    numstat = git(workspace.path, "diff", "--numstat", change.merge_base, "HEAD").split()
    assert change.scope.lines_changed == sum(int(n) for n in numstat[0::3]) + sum(int(n) for n in numstat[1::3])
    assert change.diff.startswith("diff --git a/src/shop/cart.py b/src/shop/cart.py\n")
    assert workspace.diff_summary() == ["M src/shop/cart.py (+1 -1)", "A tests/test_rounding.py (+2 -0)"]
    assert [f.path for f in workspace.files()] == ["src/shop/cart.py", "tests/test_rounding.py"]


def test_a_later_requirement_branches_from_main_as_it_is_then(project, tmp_path):
    first = project.workspace(tmp_path, "#1", "one")
    moved = project.advance_main("Later work", {"src/shop/later.py": b"Y = 2\n"})
    second = project.workspace(tmp_path, "#2", "two")
    assert first.base_sha != moved and second.base_sha == moved
    assert (second.path / "src/shop/later.py").exists() and not (first.path / "src/shop/later.py").exists()


def test_a_re_run_reopens_at_the_recorded_base_even_after_main_moved(project, tmp_path):
    recorded = project.workspace(tmp_path).base_sha
    project.advance_main("Later work", {"src/shop/later.py": b"Y = 2\n"})
    git(tmp_path / "workspaces" / "42", "update-ref", "-d", "refs/heads/aiteam/42-fix-the-total")  # killed mid-clone
    again = project.workspace(tmp_path, base_sha=recorded)
    assert again.base_sha == recorded == again.head() and not (again.path / "src/shop/later.py").exists()


def test_align_returns_to_the_recorded_attempt_or_to_the_base(project, tmp_path):
    workspace = project.workspace(tmp_path)
    workspace.apply(ROUNDING)
    first = workspace.commit("T1 (attempt 1)")
    workspace.apply(edit("src/shop/discount.py", "    return total * (100 - percent) // 100\n", "    return 0\n"))
    workspace.commit("T1 (attempt 2)")  # its transaction rolled back
    (workspace.path / "stray.py").write_text("x = 1\n")
    workspace.align(first)
    assert workspace.head() == first and [s for _, s in workspace.log()] == ["T1 (attempt 1)"]
    assert not (workspace.path / "stray.py").exists()
    workspace.align("")  # no attempt recorded: the base commit, the repository's files intact
    assert workspace.head() == workspace.base_sha and workspace.log() == []
    assert (workspace.path / "src/shop/cart.py").read_bytes() == project.blob("main", "src/shop/cart.py")


def test_an_edit_that_does_not_apply_changes_nothing(project, tmp_path):
    workspace = project.workspace(tmp_path)
    applied = workspace.apply(edit("src/shop/cart.py", "    return sum(prices)\n", "    return 0\n"))
    assert not applied.ok and "nearest lines" in applied.repair_request()
    assert git(workspace.path, "status", "--porcelain") == ""


def test_a_gitconfig_in_the_repository_runs_nothing_in_the_worker(project, tmp_path):
    """HOME is the workspace for git: without GIT_CONFIG_GLOBAL, a committed .gitconfig was read as the user's own
    and its core.fsmonitor command ran at `git add`."""
    marker = tmp_path / "ran"
    project.advance_main("Tooling", {".gitconfig": f"[core]\n\tfsmonitor = touch {marker}; false\n".encode()})
    workspace = project.workspace(tmp_path)
    workspace.apply(ROUNDING)
    workspace.commit("T1 (attempt 1)")
    workspace.align("")
    assert not marker.exists()


def test_two_workers_fetching_one_new_mirror_at_once_both_succeed(project, tmp_path):
    barrier, answers, errors = threading.Barrier(4), [], []

    def worker() -> None:
        mirror = project.mirror(tmp_path)  # each its own object and lock descriptor, as in two processes
        barrier.wait()
        try:
            with mirror.locked():
                answers.append(mirror.sync("main"))
        except Exception as exc:  # noqa: BLE001 - the assertion below shows it
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == [] and answers == [project.main()] * 4


def test_a_held_mirror_makes_the_next_holder_wait_then_fail_with_a_clear_error(project, tmp_path):
    with project.mirror(tmp_path).locked(), pytest.raises(MirrorError, match="stayed locked"):
        with project.mirror(tmp_path).locked(timeout_s=0.2):
            pass


def test_one_hold_covers_a_sync_and_the_workspace_opened_inside_it(project, tmp_path):
    mirror = project.mirror(tmp_path)
    with mirror.locked():
        base = mirror.sync("main")
        workspace = RepoWorkspace.open(mirror, tmp_path / "ws", branch="aiteam/1-x", base="main", base_sha=base)
        assert mirror.held  # the inner hold did not release the outer one
    assert workspace.head() == base and not mirror.held


def test_sync_without_the_lock_is_a_programming_error(project, tmp_path):
    with pytest.raises(RuntimeError, match="hold the mirror's lock"):
        project.mirror(tmp_path).sync("main")


def test_the_fetch_prunes_deleted_branches_and_ignores_pull_request_refs(project, tmp_path):
    git(project.work, "push", "-q", "origin", "main:refs/heads/old", "main:refs/pull/1/head")
    mirror = project.mirror(tmp_path)
    with mirror.locked():
        mirror.sync("main")
        git(project.work, "push", "-q", "origin", ":refs/heads/old")
        mirror.sync("main")
    assert git(mirror.path, "for-each-ref", "--format=%(refname)").split() == ["refs/heads/main"]


def test_a_missing_base_branch_and_a_refused_remote_are_clear_errors(project, tmp_path):
    with pytest.raises(MirrorError, match="no branch 'develop'"):
        RepoWorkspace.open(project.mirror(tmp_path), tmp_path / "w", branch="aiteam/x", base="develop")
    elsewhere = Mirror(tmp_path / "m.git", Remote(str(project.origin), local_root=tmp_path / "other", own_path="x.git"))
    with elsewhere.locked(), pytest.raises(MirrorError, match="refused: it is a local path other than"):
        elsewhere.sync("main")
    assert not list((tmp_path / "m.git").glob("refs/heads/*"))


def test_a_workspace_that_is_not_there_is_an_error_not_an_empty_repository(tmp_path):
    with pytest.raises(GitError, match="open it from the mirror"):
        RepoWorkspace(tmp_path / "nothing", "aiteam/1-x", "0" * 40).align("")


@pytest.mark.parametrize(("key", "title", "branch"), [
    ("#42", "Fix the total", "aiteam/42-fix-the-total"),
    ("PROJ-7", "Crème brûlée: ../x.lock", "aiteam/proj-7-creme-brulee-x-lock"),
    ("group/proj#9", "", "aiteam/group-proj-9"),
    ("", "--upload-pack=evil", "aiteam/upload-pack-evil"),
    ("x" * 100, "y" * 200, "aiteam/" + "x" * 32 + "-" + "y" * 48),
])
def test_branch_names_are_safe_for_git_and_bounded(key, title, branch):
    assert branch_name(key, title) == branch
    assert git(Path("/"), "check-ref-format", "--branch", branch).strip() == branch


@pytest.mark.parametrize("name", ["", "-main", "a..b", "x.lock", "a/.b", "a b", "main~1", "a@{1}", "refs/../x"])
def test_unsafe_base_branches_are_refused(name):
    with pytest.raises(BranchRefused):
        checked_branch(name)


def test_a_ticket_with_neither_key_nor_title_words_has_no_branch():
    with pytest.raises(BranchRefused, match="ticket key or a title"):
        branch_name("#", "!!!")
