"""Delivering a branch of an existing repository never drops someone else's commits: a rework may replace what
this branch's last delivery pushed, under a lease on that commit, and nothing else."""
from __future__ import annotations

import pytest

from agents.delivery import DeliveryPlan, deliver
from agents.delivery.errors import DeliveryError
from agents.delivery.git_remote import push_branch, push_commit
from agents.schemas.edits import EditsOutput
from tests.repo_history import commit_files, git, make_project


def edit(replace: str) -> EditsOutput:
    block = {"path": "src/shop/cart.py", "search": "    return round(sum(prices), 2)\n", "replace": replace}
    return EditsOutput(reasoning="the ticket's fix", edits=[block])


@pytest.fixture
def delivered(tmp_path):
    """A first attempt delivered, then reworked from the base (a review asked for another approach)."""
    project = make_project(tmp_path)
    workspace = project.workspace(tmp_path)
    workspace.apply(edit("    return 0\n"))
    pushed = workspace.commit("T1 (attempt 1)")
    assert deliver(DeliveryPlan(workspace=workspace.path, branch=workspace.branch, remote=project.remote)).succeeded
    workspace.align("")
    workspace.apply(edit("    return round(sum(prices), 2) or 0\n"))
    reworked = workspace.commit("T1 (attempt 2)")
    return project, workspace, pushed, reworked


def remote_head(project, branch: str) -> str:
    return git(project.origin, "rev-parse", f"refs/heads/{branch}").strip()


def test_a_rework_replaces_the_commit_this_branch_last_pushed(delivered):
    project, workspace, pushed, reworked = delivered
    result = deliver(DeliveryPlan(workspace=workspace.path, branch=workspace.branch, remote=project.remote,
                                  last_pushed=pushed))
    assert result.succeeded, result.error
    assert remote_head(project, workspace.branch) == reworked
    assert git(project.origin, "merge-base", "main", workspace.branch).strip() == workspace.base_sha


def test_without_the_record_of_our_last_push_a_rework_is_refused(delivered):
    project, workspace, pushed, _ = delivered
    result = deliver(DeliveryPlan(workspace=workspace.path, branch=workspace.branch, remote=project.remote))
    assert not result.succeeded and "rejected" in result.error
    assert remote_head(project, workspace.branch) == pushed


def test_a_push_is_refused_when_someone_moved_the_remote_branch(delivered):
    project, workspace, pushed, _ = delivered
    git(project.work, "fetch", "-q", "origin", workspace.branch)
    git(project.work, "checkout", "-q", "-b", "theirs", "FETCH_HEAD")
    theirs = commit_files(project.work, "A reviewer's fix-up", {"src/shop/note.py": b"NOTE = 1\n"})
    git(project.work, "push", "-q", "origin", f"theirs:{workspace.branch}")
    result = deliver(DeliveryPlan(workspace=workspace.path, branch=workspace.branch, remote=project.remote,
                                  last_pushed=pushed))
    assert not result.succeeded and "rejected" in result.error
    assert remote_head(project, workspace.branch) == theirs  # their commit kept, nothing of ours forced over it
    assert result.compensations == []  # the branch was not ours to restore


def test_the_lease_holds_at_the_moment_of_the_push(delivered):
    """The remote moves after the saga looked (inspect) and before it pushes: the lease on our commit fails."""
    project, workspace, pushed, _ = delivered
    git(project.work, "fetch", "-q", "origin", workspace.branch)
    git(project.work, "checkout", "-q", "-b", "theirs", "FETCH_HEAD")
    theirs = commit_files(project.work, "Racing fix-up", {"src/shop/race.py": b"R = 1\n"})
    git(project.work, "push", "-q", "origin", f"theirs:{workspace.branch}")
    with pytest.raises(DeliveryError, match="stale info"):
        push_commit(workspace.path, workspace.branch, project.remote, workspace.head(), replacing=pushed)
    assert remote_head(project, workspace.branch) == theirs
    with pytest.raises(DeliveryError, match="rejected"):  # push_branch sees theirs is not ours: a plain push
        push_branch(workspace.path, workspace.branch, project.remote, last_pushed=pushed)
    assert remote_head(project, workspace.branch) == theirs
