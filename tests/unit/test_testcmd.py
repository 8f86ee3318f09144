"""How a repository's test command is found and turned into a pytest run (agents/environments/testcmd.py).
Files only: nothing runs here (test_repo_env.py runs what these commands become)."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from agents.environments import BadTestCommand, NotPython, detect_test_command


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def test_the_project_setting_wins_over_the_repository_file_and_its_configuration(tmp_path):
    root = _repo(tmp_path, {".aiteam.toml": '[tests]\ncommand = "pytest tests/unit"\n',
                            "pytest.ini": "[pytest]\ntestpaths = tests\n", "tests/unit/test_a.py": ""})

    command = detect_test_command(root, configured="python -m pytest -q tests/unit/test_a.py")

    assert (command.source, command.paths) == ("project setting", ("tests/unit/test_a.py",))
    assert command.args[0] == "-q"


def test_the_repository_file_wins_over_detection(tmp_path):
    root = _repo(tmp_path, {".aiteam.toml": '[tests]\ncommand = "pytest tests/unit"\n',
                            "pytest.ini": "[pytest]\ntestpaths = tests\n", "tests/unit/test_a.py": ""})

    command = detect_test_command(root)

    assert (command.source, command.paths) == (".aiteam.toml", ("tests/unit",))


def test_a_repository_file_without_a_command_is_an_error_that_shows_the_format(tmp_path):
    root = _repo(tmp_path, {".aiteam.toml": "[tests]\nrun = 'pytest'\n", "setup.py": ""})

    with pytest.raises(BadTestCommand, match=r'\[tests\]\ncommand = "pytest tests"'):
        detect_test_command(root)


@pytest.mark.parametrize(("name", "text", "source"), [
    ("pytest.ini", "[pytest]\ntestpaths = tests\npythonpath = lib\n", "pytest.ini"),
    ("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["lib"]\n',
     "pyproject.toml [tool.pytest.ini_options]"),
    ("setup.cfg", "[tool:pytest]\ntestpaths = tests\npythonpath = lib\n", "setup.cfg [tool:pytest]"),
    ("tox.ini", "[pytest]\ntestpaths = tests\npythonpath = lib\n", "tox.ini [pytest]"),
    # pytest 9's native TOML configuration
    ("pyproject.toml", '[tool.pytest]\ntestpaths = ["tests"]\npythonpath = ["lib"]\n', "pyproject.toml [tool.pytest]"),
    ("pytest.toml", '[pytest]\ntestpaths = ["tests"]\npythonpath = ["lib"]\n', "pytest.toml"),
    (".pytest.toml", '[pytest]\ntestpaths = ["tests"]\npythonpath = ["lib"]\n', ".pytest.toml"),
])
def test_pytest_configuration_gives_the_paths_and_the_importable_roots(tmp_path, name, text, source):
    root = _repo(tmp_path, {name: text, "tests/test_a.py": "", "manage.py": ""})

    command = detect_test_command(root)

    assert (command.runner, command.source, command.paths) == ("pytest", source, ("tests",))
    assert command.pythonpath == (".", "lib")  # the runner overrides pythonpath, so the repository's is carried
    # an -x in the configuration's addopts cannot cut the run short, nor a module that does not import hide the rest
    assert command.args[-2:] == ("--maxfail=0", "--continue-on-collection-errors")


def test_a_src_layout_makes_src_importable(tmp_path):
    root = _repo(tmp_path, {"setup.cfg": "[metadata]\nname = x\n", "src/calc/__init__.py": "",
                            "tests/test_calc.py": "import pytest\n"})

    command = detect_test_command(root)

    assert command.pythonpath == (".", "src") and command.paths == (".",)


@pytest.mark.parametrize(("configured", "pythonpath"), [
    # zope.interface 8.7's shape: a namespace package under src/, discovered from inside it
    ("python -m unittest discover -s src/zope", (".", "src", "src/zope")),
    ("python -m unittest zope.calc.tests", (".", "src")),
    ("django-admin test --settings=tests.settings", (".", "src")),
])
def test_a_src_layout_is_importable_for_unittest_and_django_too(tmp_path, configured, pythonpath):
    root = _repo(tmp_path, {"setup.cfg": "[metadata]\nname = x\n", "src/zope/calc/__init__.py": "",
                            "src/zope/calc/tests/__init__.py": "", "zope/calc/tests.py": "", "tests/settings.py": ""})

    assert detect_test_command(root, configured=configured).pythonpath == pythonpath


@pytest.mark.parametrize(("changedir", "commands", "paths", "pythonpath"), [
    # typing_extensions 4.16.0's shape: its module and its tests in src/, imported from there
    ("src", "python -m unittest discover", ("src",), (".", "src")),
    ("{toxinidir}/src", "python -m pytest test_calc.py::T {posargs}", ("src/test_calc.py::T",), (".", "src")),
    ("src", "pytest", ("src",), (".", "src")),  # pytest collects where it runs
    ("src", "python -m unittest test_calc.T", ("src/test_calc.py::T",), (".", "src")),
])
def test_a_tox_changedir_is_where_the_commands_paths_and_importable_root_are(tmp_path, changedir, commands, paths,
                                                                             pythonpath):
    root = _repo(tmp_path, {"tox.ini": f"[testenv]\nchangedir = {changedir}\ncommands = {commands}\n",
                            "src/calc.py": "", "src/test_calc.py": ""})

    command = detect_test_command(root)

    assert (command.paths, command.pythonpath) == (paths, pythonpath)
    assert command.source.endswith("in changedir src")


@pytest.mark.parametrize("changedir", ["{envtmpdir}", "../elsewhere", "/tmp"])
def test_a_tox_changedir_outside_the_repository_is_refused_by_name(tmp_path, changedir):
    root = _repo(tmp_path, {"tox.ini": f"[testenv]\nchangedir = {changedir}\ncommands = pytest\n", "test_a.py": ""})

    with pytest.raises(BadTestCommand, match=f"tox runs the tests in changedir {re.escape(changedir)}, outside the "
                                             "repository"):
        detect_test_command(root)


def test_tox_commands_are_read_not_run(tmp_path):
    root = _repo(tmp_path, {"tox.ini": """\
        [testenv]
        deps = pytest
        commands =
            coverage run -m pytest {posargs} -q tests
        """, "tests/test_a.py": ""})

    command = detect_test_command(root)

    assert (command.runner, command.paths, command.source) == ("pytest", ("tests",), "tox.ini [testenv] commands")


def test_coverage_options_and_toxs_own_paths_are_left_out_of_a_tox_command(tmp_path):
    # cachetools 8.0.3's tox.ini: `term-missing` is --cov-report's value, not a path, and {envtmpdir} is tox's
    root = _repo(tmp_path, {"tox.ini": """\
        [testenv]
        deps =
            pytest
            pytest-cov
        commands =
            py.test --basetemp={envtmpdir} --cov=cachetools --cov-branch --cov-report term-missing {posargs}
        """, "tests/test_a.py": ""})

    command = detect_test_command(root)

    assert (command.runner, command.paths) == ("pytest", (".",))
    assert command.args == ("--maxfail=0", "--continue-on-collection-errors")
    assert command.dropped == ("--basetemp={envtmpdir}", "--cov=cachetools", "--cov-branch", "--cov-report term-missing")


@pytest.mark.parametrize(("line", "paths", "args"), [
    ("pytest {posargs:tests/unit}", ("tests/unit",), ()),  # tox's default when no arguments are given
    ("pytest {toxinidir}/tests -W error", ("./tests",), ("-W", "error")),
    ("pytest --junit-prefix={env:PREFIX:x} tests", ("tests",), ("--junit-prefix=x",)),
    ("pytest --cov src tests", ("tests",), ()),  # --cov takes the word after it, as pytest-cov's argparse does
    ("pytest --cov --cov-report=xml tests", ("tests",), ()),
    ("pytest -p pytest_randomly --randomly-seed 7 tests", ("tests",), ("-p", "pytest_randomly", "--randomly-seed", "7")),
    ("pytest --strict-markers tests", ("tests",), ("--strict-markers",)),
])
def test_tox_substitutions_and_plugin_options_are_read_as_tox_and_pytest_would(tmp_path, line, paths, args):
    root = _repo(tmp_path, {"tox.ini": f"[testenv]\ncommands = {line}\n", "tests/unit/test_a.py": ""})

    command = detect_test_command(root)

    assert command.paths == paths and command.args[:-2] == args


def test_coverage_options_in_the_configurations_addopts_are_overridden_not_needed(tmp_path):
    root = _repo(tmp_path, {"setup.cfg": "[tool:pytest]\naddopts = -ra --cov=pkg --cov-report=term-missing\n"
                                         "    --strict-markers\n", "tests/test_a.py": ""})

    command = detect_test_command(root)

    assert command.args[:2] == ("-o", "addopts=-ra --strict-markers")
    assert command.dropped == ("--cov=pkg (addopts)", "--cov-report=term-missing (addopts)")
    clean = _repo(tmp_path / "clean", {"pytest.ini": "[pytest]\naddopts = -ra\n"})
    assert "-o" not in detect_test_command(clean).args  # nothing to leave out: the configuration stands


@pytest.mark.parametrize("addopts", ["-n auto --dist loadscope -ra", "-nauto -ra", "--numprocesses=4 -ra",
                                     "-n auto --cov=src --junitxml=reports/junit.xml -ra", "-x -n 2 -ra"])
def test_xdist_in_the_configurations_addopts_is_left_out_so_every_test_streams_its_outcome(tmp_path, addopts):
    """pytest-xdist's workers do not get the outcome stream: spread over them, no test (the canaries included)
    would be reported, and an honest repository would read as forged."""
    root = _repo(tmp_path, {"pyproject.toml": f'[tool.pytest.ini_options]\naddopts = "{addopts}"\n',
                            "tests/test_a.py": ""})

    command = detect_test_command(root)

    assert command.args[:2] == ("-o", "addopts=-ra")
    assert all("(addopts)" in word for word in command.dropped) and command.dropped
    assert detect_test_command(_repo(tmp_path / "cmd", {"tox.ini": "[testenv]\ncommands = pytest -n 2 tests\n",
                                                        "tests/test_a.py": ""})).dropped == ("-n 2",)


@pytest.mark.parametrize(("files", "source"), [
    ({"pytest.toml": "", "pytest.ini": "[pytest]\naddopts = -n 4\n"}, "pytest.toml"),  # even empty, it is the one
    ({".pytest.toml": "[pytest]\n", "pytest.ini": "[pytest]\naddopts = -n 4\n"}, ".pytest.toml"),
    ({"pytest.ini": "", "pyproject.toml": '[tool.pytest]\naddopts = ["-n", "4"]\n'}, "pytest.ini"),
    ({"pyproject.toml": '[tool.pytest]\nminversion = "9.0"\n', "tox.ini": "[pytest]\naddopts = -n 4\n"},
     "pyproject.toml [tool.pytest]"),
    ({"pyproject.toml": '[tool.pytest]\n', "tox.ini": "[pytest]\naddopts = -n 4\n"}, "tox.ini [pytest]"),
])
def test_pytests_own_precedence_picks_the_one_configuration_it_reads(tmp_path, files, source):
    root = _repo(tmp_path, {**files, "tests/test_a.py": ""})

    command = detect_test_command(root)

    assert command.source == source
    assert command.dropped == (("-n 4 (addopts)",) if source == "tox.ini [pytest]" else ())


def test_refused_addopts_of_pytests_native_toml_tables_are_left_out(tmp_path):
    addopts = '["-ra", "-n", "auto", "--cov=pkg", "--junitxml=out.xml"]'
    for name, table in (("pyproject.toml", "tool.pytest"), ("pytest.toml", "pytest")):
        root = _repo(tmp_path / name, {name: f'[{table}]\naddopts = {addopts}\ntestpaths = ["tests"]\n',
                                       "tests/test_a.py": "", "docs/test_b.py": ""})

        command = detect_test_command(root)

        assert command.args[:2] == ("-o", "addopts=-ra") and command.paths == ("tests",)
        assert command.dropped == ("-n auto (addopts)", "--cov=pkg (addopts)", "--junitxml=out.xml (addopts)")


def test_testpaths_that_match_nothing_are_skipped_as_pytest_skips_them(tmp_path):
    root = _repo(tmp_path, {"pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["tests", "src/*/tests", "/abs"]\n',
                            "src/pkg/tests/test_a.py": ""})
    assert detect_test_command(root).paths == ("src/pkg/tests",)  # a glob is expanded, as pytest does
    bare = _repo(tmp_path / "bare", {"pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n', "a.py": ""})
    assert detect_test_command(bare).paths == (".",)  # none exists: pytest collects from the root


def test_make_variables_in_a_recipe_are_empty_as_make_leaves_them_unless_given(tmp_path):
    root = _repo(tmp_path, {"Makefile": "test:\n\tpython -m unittest -v ${tests}\n", "tests/test_a.py": "",
                            "setup.py": ""})

    command = detect_test_command(root)

    assert (command.runner, command.source, command.paths) == ("unittest", "Makefile test", (".",))


def test_manage_py_runs_django_tests_through_pytest_django_with_its_settings(tmp_path):
    root = _repo(tmp_path, {"manage.py": """\
        import os, sys
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
        """, "shop/__init__.py": "", "shop/tests.py": ""})

    command = detect_test_command(root)

    assert command.runner == "django" and command.plugins == ("pytest-django",)
    assert "--ds=shop.settings" in command.args and "python_files=test*.py" in command.args


def test_django_labels_become_paths(tmp_path):
    root = _repo(tmp_path, {"manage.py": "", "shop/__init__.py": "", "shop/tests.py": ""})

    command = detect_test_command(root, configured="./manage.py test --parallel 4 shop.tests.CartTests "
                                                   "--settings=shop.dev")

    assert command.paths == ("shop/tests.py::CartTests",) and "--ds=shop.dev" in command.args


RUNTESTS = """\
    import os
    import sys

    from django.core.management import execute_from_command_line


    def runtests():
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
        argv = sys.argv[:1] + ["test"] + sys.argv[1:]
        execute_from_command_line(argv)


    if __name__ == "__main__":
        runtests()
    """


@pytest.mark.parametrize(("files", "configured"), [
    ({}, "python -m django test --settings=tests.settings"),
    ({}, "django-admin test --settings tests.settings"),
    # django-filter 26.2's shape: a reusable app without manage.py, its tox running Django's usual runtests.py
    ({"runtests.py": RUNTESTS, "tox.ini": "[testenv]\ncommands = coverage run --parallel-mode --source app "
                                          "./runtests.py --testrunner xmlrunner.XMLTestRunner {posargs}\n"}, None),
    ({"runtests.py": RUNTESTS, "Makefile": "test:\n\tpython runtests.py\n"}, None),
])
def test_a_django_app_without_manage_py_runs_django_tests_with_its_settings(tmp_path, files, configured):
    root = _repo(tmp_path, {"setup.py": "", "app/__init__.py": "", "tests/__init__.py": "", "tests/settings.py": "",
                            "tests/test_app.py": "", **files})

    command = detect_test_command(root, configured=configured)

    assert (command.runner, command.paths, command.plugins) == ("django", (".",), ("pytest-django",))
    assert command.args[0] == "--ds=tests.settings"


def test_a_runtests_py_that_configures_django_in_code_is_not_read_as_django_admin_test(tmp_path):
    script = RUNTESTS.replace('execute_from_command_line(argv)', 'settings.configure(DEBUG=True)')
    root = _repo(tmp_path, {"runtests.py": script, "tox.ini": "[testenv]\ncommands = python runtests.py\n",
                            "tests/__init__.py": "", "tests/test_app.py": ""})

    assert detect_test_command(root).runner != "django"


def test_a_makefile_test_target_is_read_for_its_runner(tmp_path):
    root = _repo(tmp_path, {"Makefile": "lint:\n\truff .\n\ntest:\n\t@. venv/bin/activate && $(PYTHON) -m unittest "
                                        "discover -s tests -p 'check_*.py'\n", "tests/check_a.py": "", "a.py": ""})

    command = detect_test_command(root)

    assert (command.runner, command.source, command.paths) == ("unittest", "Makefile test", ("tests",))
    assert "python_files=check_*.py" in command.args and command.pythonpath == (".", "tests")


def test_plain_unittest_files_are_discovered_as_unittest_would(tmp_path):
    root = _repo(tmp_path, {"calc.py": "", "tests/__init__.py": "",
                            "tests/tests_calc.py": "import unittest\n\nclass T(unittest.TestCase):\n    pass\n"})

    command = detect_test_command(root)

    assert (command.runner, command.paths) == ("unittest", (".",))
    assert "python_files=test*.py" in command.args  # unittest's pattern, wider than pytest's test_*.py


def test_unittest_names_become_node_ids(tmp_path):
    root = _repo(tmp_path, {"setup.py": "", "tests/__init__.py": "", "tests/test_calc.py": ""})

    command = detect_test_command(root, configured="python -m unittest tests.test_calc.AddTests.test_one")

    assert command.paths == ("tests/test_calc.py::AddTests::test_one",)


def test_pytest_files_with_a_conftest_are_pytest(tmp_path):
    root = _repo(tmp_path, {"conftest.py": "", "pkg/test_one.py": "def test_x():\n    pass\n"})

    assert detect_test_command(root).runner == "pytest"


@pytest.mark.parametrize(("command", "why"), [
    ("pytest -x tests", "stops at the first failure"),
    ("pytest --junitxml=out.xml", "moves the report"),
    ("pytest -p no:junitxml", "turns off the report"),
    ("python -m pytest --lf", "runs only last failures"),
])
def test_options_that_would_hide_outcomes_are_refused(tmp_path, command, why):
    root = _repo(tmp_path, {"setup.py": ""})

    with pytest.raises(BadTestCommand, match=why):
        detect_test_command(root, configured=command)


@pytest.mark.parametrize("command", ["pytest /etc", "pytest ../other/tests", "python -m unittest ../x"])
def test_paths_outside_the_repository_are_refused(tmp_path, command):
    root = _repo(tmp_path, {"setup.py": ""})

    with pytest.raises(BadTestCommand, match="outside the repository"):
        detect_test_command(root, configured=command)


def test_a_command_aiteam_cannot_read_per_test_is_refused_with_the_forms_it_can(tmp_path):
    root = _repo(tmp_path, {"setup.py": ""})

    with pytest.raises(BadTestCommand, match=r"'nose2 -v' is not a test command .* python -m unittest"):
        detect_test_command(root, configured="nose2 -v")


def test_a_repository_that_is_not_python_is_refused_naming_what_was_found(tmp_path):
    root = _repo(tmp_path, {"package.json": "{}", "go.mod": "module x\n", "scripts/build.py": ""})

    with pytest.raises(NotPython, match=r"package.json \(JavaScript\), go.mod \(Go\)"):
        detect_test_command(root)


def test_an_empty_repository_is_refused(tmp_path):
    with pytest.raises(NotPython, match="no Python file"):
        detect_test_command(_repo(tmp_path, {"README.md": "hello"}))


def test_python_files_alone_make_a_python_repository_and_pytest_runs_them_all(tmp_path):
    command = detect_test_command(_repo(tmp_path, {"tool.py": "print(1)\n"}))

    assert (command.runner, command.paths) == ("pytest", (".",)) and "no test files yet" in command.source


def test_a_tox_command_for_some_environments_counts_when_none_is_for_all(tmp_path):
    # pyparsing 3.3.3's shape: before, nothing was found and pytest ran over the whole checkout
    root = _repo(tmp_path, {"tox.ini": """\
        [testenv]
        commands =
            py38: pytest -x tests
            doctest: sphinx-build -b doctest docs docs/_build
            unit: pytest tests examples/tiny/tests {posargs}
        """, "tests/test_a.py": "", "examples/tiny/tests/test_b.py": ""})

    command = detect_test_command(root)

    assert (command.paths, command.source) == (("tests", "examples/tiny/tests"), "tox.ini [testenv] commands (unit:)")
    (root / "tox.ini").write_text("[testenv]\ncommands =\n    unit: pytest tests\n    python -m pytest examples\n")
    assert detect_test_command(root).paths == ("examples",)  # the line for every environment wins


def test_colorama_style_test_files_are_collected_by_pytest(tmp_path):
    root = _repo(tmp_path, {"pyproject.toml": '[project]\nname = "colorama"\n', "colorama/__init__.py": "",
                            "colorama/tests/ansi_test.py": "import unittest\n"})

    command = detect_test_command(root)

    assert (command.runner, command.paths) == ("pytest", (".",))
    assert command.source == "colorama/tests/ansi_test.py (pytest's file names)"
