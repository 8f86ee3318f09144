"""A large existing file the change touches does not fail the run (issue 23): the changed files are read whole for
the runner check and the CI hold, and only the roles' budgets decide what a model sees of them."""
from agents.schemas import SourceFile
from lifecycle.repository_runs import changed_files_reach
from lifecycle.services.holds import ci_hold
from tests.repo_history import commit_files, git, make_project

MAX_CHARS = SourceFile.model_fields["content"].metadata[0].max_length
LARGE = "".join(f"def rate_{k}(amount):\n    return amount * {k} / 100\n\n\n" for k in range(3000))


def test_a_changed_file_over_sources_limit_is_read_whole_and_checked(tmp_path):
    project = make_project(tmp_path)
    commit_files(project.work, "A large rates table", {"src/shop/rates.py": LARGE.encode(),
                                                       "setup.cfg": b"[metadata]\nname = shop\n"})
    git(project.work, "push", "-q", "origin", "main")
    workspace = project.workspace(tmp_path)
    changed = LARGE.replace("def rate_7(amount):", "def rate_7(amount: float):")
    (workspace.path / "src/shop/rates.py").write_text(changed + "import _pytest\n")
    (workspace.path / "setup.cfg").write_text("[metadata]\nname = shop2\n")  # a path no model answer may name
    workspace.commit("T1: annotate rate_7")

    files = {f.path: f.content for f in workspace.files()}

    assert len(LARGE) > MAX_CHARS and files["src/shop/rates.py"].startswith(changed) and "setup.cfg" in files
    assert changed_files_reach(workspace) == ["src/shop/rates.py:12001: imports _pytest, part of the test runner "
                                              "or the interpreter's machinery"]  # the whole file was checked
    assert ci_hold(workspace.files()) == ""
