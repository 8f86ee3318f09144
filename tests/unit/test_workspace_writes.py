"""Files the team writes never go through a symbolic link the repository tracks, nor into `.git`: a link such as
tests/acceptance/test_issue.py -> ../../.git/config would otherwise let an answer rewrite git's configuration,
and git would run what it names at the next commit (a hostile repository and ticket together)."""
from __future__ import annotations

import os

import pytest

from agents.schemas import SourceFile
from agents.workspace import WorkspaceError
from tests.repo_history import commit_files, git, make_project

HOOK = '[core]\n    fsmonitor = "touch {marker}"\n'


@pytest.fixture
def linked(tmp_path):
    """A workspace on a repository that tracks a link into .git and a linked directory."""
    project = make_project(tmp_path / "origin")
    git(project.work, "checkout", "-q", "main")
    (project.work / "tests" / "acceptance").mkdir(parents=True)
    os.symlink("../../.git/config", project.work / "tests" / "acceptance" / "test_issue.py")
    os.symlink("../.git", project.work / "docs" / "gitdir")
    commit_files(project.work, "Links", {})
    git(project.work, "push", "-q", "origin", "main")
    return project.workspace(tmp_path)


@pytest.mark.parametrize("path", ["tests/acceptance/test_issue.py", "docs/gitdir/config", ".git/config",
                                  ".git/hooks/pre-commit"])
def test_a_write_through_a_tracked_link_or_into_git_is_refused(linked, tmp_path, path):
    marker = tmp_path / "ran"
    config = (linked.path / ".git" / "config").read_text()

    with pytest.raises(WorkspaceError, match="symbolic link|inside .git"):
        # built without validation: the schema refuses some of these paths already, and the workspace must too
        linked.write([SourceFile.model_construct(path=path, content=HOOK.format(marker=marker))])
    linked.commit("after the refused write")

    assert (linked.path / ".git" / "config").read_text() == config and not marker.exists()


def test_an_ordinary_file_is_written(linked):
    linked.write([SourceFile(path="tests/acceptance/test_total.py", content="def test_ok():\n    pass\n")])
    assert (linked.path / "tests/acceptance/test_total.py").read_text().startswith("def test_ok")


def test_a_gitattributes_marking_code_binary_does_not_hide_changed_lines_from_the_scope(tmp_path):
    project = make_project(tmp_path / "origin")
    project.advance_main("Hide diffs", {".gitattributes": b"*.py -diff\n"})
    workspace = project.workspace(tmp_path)
    lines = "".join(f"def f{i}():\n    return {i}\n" for i in range(200))
    workspace.write([SourceFile(path="src/shop/cart.py", content=lines)])
    workspace.commit("T1 (attempt 1)")

    change = workspace.change()

    assert "Binary files" not in change.diff and change.scope.lines_changed >= 400, change.scope
