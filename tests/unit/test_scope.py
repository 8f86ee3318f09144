"""The scope guard's measure: lines changed, top-level modules and CI, dependency and settings files, read from a
unified diff exactly as git counts them."""
from __future__ import annotations

import pytest

from agents.edits import apply_edits, unified_diff
from agents.repo.scope import ScopeLimits, measure, module_of, parse_diff
from agents.schemas.edits import EditsOutput
from tests.repo_history import commit_files, git, make_project

TRICKY = """diff --git a/src/shop/cart.py b/src/shop/cart.py
index 1609f32..efd86ce 100644
--- a/src/shop/cart.py
+++ b/src/shop/cart.py
@@ -1,4 +1,3 @@
 def total(prices):
--- a comment that looks like a file header
-++ and another
+    return 0
 # end
\\ No newline at end of file
diff --git a/assets/logo.png b/assets/logo.png
index 1111111..2222222 100644
Binary files a/assets/logo.png and b/assets/logo.png differ
diff --git "a/docs/caf\\303\\251.md" "b/docs/caf\\303\\251.md"
new file mode 100644
--- /dev/null
+++ "b/docs/caf\\303\\251.md"
@@ -0,0 +1 @@
+menu
diff --git a/old.py b/old.py
deleted file mode 100644
--- a/old.py
+++ /dev/null
@@ -1,2 +0,0 @@
-A = 1
-B = 2
"""


def test_hunks_are_counted_by_their_headers_not_by_how_lines_look():
    files = {f.path: f for f in parse_diff(TRICKY)}
    assert list(files) == ["src/shop/cart.py", "assets/logo.png", "docs/café.md", "old.py"]
    assert (files["src/shop/cart.py"].added, files["src/shop/cart.py"].removed) == (1, 2)
    assert files["assets/logo.png"].binary and files["assets/logo.png"].added == 0
    assert (files["docs/café.md"].added, files["old.py"].removed) == (1, 2)


def test_the_measure_agrees_with_git_numstat_on_a_real_change(tmp_path):
    project = make_project(tmp_path)
    git(project.work, "checkout", "-q", "-b", "change")
    lines = "".join(f"VALUE_{n} = {n}\n" for n in range(40))
    commit_files(project.work, "A change", {"src/shop/cart.py": b"-- not a header\n--- nor this\n" + lines.encode(),
                                            "assets/logo.bin": bytes(range(200)), "docs/windows.txt": b"one\r\n"})
    diff = git(project.work, "diff", "--no-renames", "main", "change")
    numstat = [line.split("\t") for line in git(project.work, "diff", "--numstat", "main", "change").splitlines()]
    expected = sum(int(a) + int(r) for a, r, _ in numstat if a != "-")
    scope = measure(diff)
    assert scope.lines_changed == expected == 48 and {f.path for f in scope.files if f.binary} == {"assets/logo.bin"}
    assert scope.modules == ("assets", "docs", "shop")


def test_the_diff_of_applied_edits_measures_the_same_as_git_s(tmp_path):
    before = {"app/views.py": b"def a():\n    return 1\n\n\ndef b():\n    return 2\n"}
    answer = EditsOutput(reasoning="r", edits=[{"path": "app/views.py", "search": "    return 2\n",
                                                "replace": "    return 3\n    # why\n"}],
                         files=[{"path": "tests/test_views.py", "content": "def test():\n    pass\n"}])
    scope = measure(unified_diff(before, apply_edits(before, answer)))
    assert scope.lines_changed == 5 and scope.modules == ("app", "tests")


@pytest.mark.parametrize(("path", "module"), [
    ("src/shop/cart.py", "shop"), ("shop/__init__.py", "shop"), ("tests/test_cart.py", "tests"),
    ("setup.py", "setup"), ("README.md", "README.md"), ("src/x.py", "x"),
])
def test_top_level_modules_skip_src(path, module):
    assert module_of(path) == module


def diff_touching(*paths: str) -> str:
    return "".join(f"diff --git a/{p} b/{p}\n--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-a\n+b\n" for p in paths)


def test_ci_dependency_and_settings_files_are_named_wherever_they_sit():
    scope = measure(diff_touching(
        ".github/workflows/ci.yml", "services/api/.gitlab-ci.yml", "Jenkinsfile", "requirements-dev.txt",
        "requirements/base.txt", "services/api/pyproject.toml", "poetry.lock", "setup.cfg", ".github/CODEOWNERS",
        "mysite/settings.py", "mysite/settings/prod.py", "tox.ini", "tests/conftest.py", ".env.production",
        "shop/cart.py", "docs/ci.md", "myJenkinsfile.txt", ".aiteam.toml", ".gitea/workflows/test.yaml",
        ".gitlab/issue_templates/bug.md"))
    assert scope.ci_files == (".github/workflows/ci.yml", "Jenkinsfile", "services/api/.gitlab-ci.yml")
    assert scope.dependency_files == ("poetry.lock", "requirements-dev.txt", "requirements/base.txt",
                                      "services/api/pyproject.toml", "setup.cfg")
    assert scope.settings_files == (".aiteam.toml", ".env.production", ".gitea/workflows/test.yaml", ".github/CODEOWNERS",
                                    ".gitlab/issue_templates/bug.md", "mysite/settings.py", "mysite/settings/prod.py",
                                    "tests/conftest.py", "tox.ini")


def test_within_the_limits_there_is_no_reason_to_stop():
    assert measure(diff_touching("shop/cart.py", "tests/test_cart.py")).reasons() == []


def test_a_400_line_change_over_three_modules_gives_both_reasons():
    added = "".join(f"+line {n}\n" for n in range(400))
    diff = f"--- /dev/null\n+++ b/shop/big.py\n@@ -0,0 +1,400 @@\n{added}" + diff_touching("billing/a.py", "tests/t.py")
    reasons = measure(diff).reasons()
    assert reasons == ["404 lines changed, over the limit of 300",
                       "3 top-level modules touched (billing, shop, tests), over the limit of 2"]
    assert measure(diff).reasons(ScopeLimits(max_lines=500, max_modules=3)) == []


def test_ci_and_dependency_changes_are_reasons_however_small():
    reasons = measure(diff_touching(".github/workflows/ci.yml", "requirements.txt")).reasons()
    assert reasons == ["changes CI files: .github/workflows/ci.yml", "changes dependency files: requirements.txt"]


def test_an_empty_diff_is_an_empty_change():
    scope = measure("")
    assert scope.empty and scope.lines_changed == 0 and scope.to_dict()["files"] == []
