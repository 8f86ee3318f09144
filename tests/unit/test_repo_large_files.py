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


def test_a_changed_file_with_a_non_ascii_name_is_read_and_checked_and_summarized_as_named(tmp_path):
    # git diff --name-only quoted it ("src/shop/m\303\263dulo.py"), a path read_files found nothing at
    project = make_project(tmp_path)
    workspace = project.workspace(tmp_path)
    (workspace.path / "src/shop/módulo.py").write_text("import _pytest\n")
    (workspace.path / "src/shop/cart.py").rename(workspace.path / "src/shop/carrito.py")
    (workspace.path / ".github/workflows").mkdir(parents=True)
    (workspace.path / ".github/workflows/publicación.yml").write_text("on: push\n")
    workspace.commit("T1: a module with an accent")

    changed = [".github/workflows/publicación.yml", "src/shop/carrito.py", "src/shop/módulo.py"]
    assert workspace.changed_paths() == changed and [f.path for f in workspace.files()] == changed
    assert changed_files_reach(workspace) == ["src/shop/módulo.py:1: imports _pytest, part of the test runner or the "
                                              "interpreter's machinery"]
    assert ci_hold(workspace.files()) == "the change adds or edits CI workflows (.github/workflows/publicación.yml)"
    assert workspace.diff_summary() == ["A .github/workflows/publicación.yml (+1 -0)", "R src/shop/carrito.py (+0 -0)",
                                        "A src/shop/módulo.py (+1 -0)"]
