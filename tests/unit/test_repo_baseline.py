"""Tests before and after a change: the baseline's two runs mark flaky tests, pass-to-pass catches a change that
breaks or drops a passing test, fail-to-pass holds a bug's reproduction test to failing first and passing after.
The comparison is pure (first tests); the last ones run a real repository in the sandbox."""
from __future__ import annotations

import os
import shutil
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from agents.environments import (
    Environment,
    PackageSources,
    baseline_from,
    compare,
    detect_test_command,
    prepare_environment,
    run_repository,
)
from agents.environments import run as environment_runs
from agents.environments.repository import BaselineUnusable, judged_report, prepare_repository
from agents.environments.wheels import repack_installed, write_wheel
from agents.sandbox import SandboxLimits, stream
from agents.sandbox.report import TestReport
from agents.sandbox.runner import RepoRun, repository_command

pytestmark = pytest.mark.xdist_group("sandbox_uid")  # with the other sandbox modules: one run at a time
LIMITS = SandboxLimits(timeout_s=60, cpu_s=30, memory_bytes=1024**3, max_output_chars=8000)
P, F, E = "passed", "failed", "errors"


def test_a_test_whose_outcome_differs_between_the_base_runs_is_flaky():
    baseline = baseline_from({"t::a": P, "t::b": P, "t::c": F, "t::d": P}, {"t::a": P, "t::b": F, "t::c": F})

    assert baseline.flaky == ("t::b", "t::d") and baseline.passing == ("t::a",)


def test_pass_to_pass_lists_what_now_fails_and_what_disappeared_but_not_flaky_tests():
    baseline = baseline_from({"t::a": P, "t::b": P, "t::flaky": P, "t::c": F},
                             {"t::a": P, "t::b": P, "t::flaky": F, "t::c": F})

    result = compare(baseline, {"t::a": F, "t::flaky": F, "t::c": P, "t::new": P})

    assert (result.broken, result.disappeared, result.fixed, result.added) == (("t::a",), ("t::b",), ("t::c",),
                                                                               ("t::new",))
    assert not result.ok and result.before == {P: 3, F: 1, E: 0, "skipped": 0}


def test_a_module_that_no_longer_imports_breaks_its_tests_rather_than_hiding_them():
    baseline = baseline_from({"tests/test_a.py::test_x": P}, {"tests/test_a.py::test_x": P})

    result = compare(baseline, {"tests/test_a.py": E})

    assert result.broken == ("tests/test_a.py::test_x",) and result.disappeared == ()


@pytest.mark.parametrize(("at_base", "after", "ok"), [
    ({"tests/test_bug.py": E}, {"tests/test_bug.py::test_bug": P}, True),  # imported what did not exist yet
    ({"tests/test_bug.py::test_bug": F}, {"tests/test_bug.py::test_bug": P}, True),
    ({"tests/test_bug.py::test_bug": P}, {"tests/test_bug.py::test_bug": P}, False),  # reproduces nothing
    ({}, {"tests/test_bug.py::test_bug": P}, False),  # never ran at base
    ({"tests/test_bug.py::test_bug": F}, {"tests/test_bug.py::test_bug": F}, False),  # not fixed
])
def test_fail_to_pass_needs_a_failure_at_base_and_a_pass_after(at_base, after, ok):
    result = compare(baseline_from({}, {}), after, reproductions=["tests/test_bug.py::test_bug"],
                     reproductions_at_base=at_base)

    assert result.reproductions[0].ok is ok and result.ok is ok


# --- real runs -------------------------------------------------------------------------------------------------

CALC = "def add(a, b):\n    return a + b\n\n\ndef mean(values):\n    return sum(values) // len(values)\n"
TESTS = """\
    from pathlib import Path

    from calc import add, mean


    def test_add():
        assert add(2, 3) == 5


    def test_mean_of_equal_values():
        assert mean([2, 2]) == 2


    def test_depends_on_a_coin():
        assert Path(__file__).with_name("coin.txt").read_text() == "heads"


    def test_known_failure():
        assert add(0.1, 0.2) == 0.3
    """
REPRODUCTION = "from calc import mean\n\n\ndef test_mean_keeps_fractions():\n    assert mean([1, 2]) == 1.5\n"
REPRO_ID = "tests/test_mean_bug.py::test_mean_keeps_fractions"


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    """A repository with a bug (mean floors), its base runs' environment, and the two base runs' outcomes: the
    coin file is turned over between them, as a test that depends on the outside world would see it."""
    root = tmp_path_factory.mktemp("repo")
    (root / "tests").mkdir()
    (root / "calc.py").write_text(CALC)
    (root / "tests" / "test_calc.py").write_text(textwrap.dedent(TESTS))
    runner = repack_installed(tmp_path_factory.mktemp("runner"), ["pytest"])[0].parent
    environment = prepare_environment(root, cache_dir=tmp_path_factory.getbasetemp() / "repo-envs",
                                      sources=PackageSources(runner_wheels=runner))
    command = detect_test_command(root)
    runs = []
    for side in ("heads", "tails"):
        (root / "tests" / "coin.txt").write_text(side)
        runs.append(run_repository(root, command, environment, limits=LIMITS))
    return root, command, environment, baseline_from(runs[0].outcomes, runs[1].outcomes)


def _changed(root: Path, tmp_path: Path, files: dict[str, str]) -> Path:
    copy = tmp_path / "changed"
    shutil.copytree(root, copy)
    for name, text in files.items():
        (copy / name).write_text(text)
    return copy


def test_the_base_runs_mark_the_coin_test_flaky_and_keep_the_others(repository):
    _, _, _, baseline = repository

    assert baseline.flaky == ("tests/test_calc.py::test_depends_on_a_coin",)
    assert baseline.passing == ("tests/test_calc.py::test_add", "tests/test_calc.py::test_mean_of_equal_values")
    assert baseline.outcomes["tests/test_calc.py::test_known_failure"] == F


def test_a_fix_with_its_reproduction_passes_the_comparison(repository, tmp_path):
    root, command, environment, baseline = repository
    with_reproduction = _changed(root, tmp_path / "base", {"tests/test_mean_bug.py": REPRODUCTION})
    fixed = _changed(with_reproduction, tmp_path / "after", {"calc.py": CALC.replace("//", "/")})

    at_base = run_repository(with_reproduction, command, environment, limits=LIMITS)
    after = run_repository(fixed, command, environment, limits=LIMITS, expected=[REPRO_ID])
    result = compare(baseline, after.outcomes, reproductions=[REPRO_ID], reproductions_at_base=at_base.outcomes)

    assert result.ok, result.to_dict()
    assert result.reproductions[0].at_base == F and result.reproductions[0].after == P
    assert after.outcomes["tests/test_calc.py::test_depends_on_a_coin"] == F  # flaky: it judges nothing
    assert result.added == (REPRO_ID,) and after.report.tampered == []


def test_a_change_that_breaks_and_drops_passing_tests_is_stopped(repository, tmp_path):
    root, command, environment, baseline = repository
    tests = textwrap.dedent(TESTS).replace("def test_mean_of_equal_values", "def _no_longer_a_test")
    broken = _changed(root, tmp_path, {"calc.py": CALC.replace("a + b", "a - b"), "tests/test_calc.py": tests})

    after = run_repository(broken, command, environment, limits=LIMITS)
    result = compare(baseline, after.outcomes)

    assert result.broken == ("tests/test_calc.py::test_add",)
    assert result.disappeared == ("tests/test_calc.py::test_mean_of_equal_values",)
    assert not result.ok


# --- baselines that cannot judge a change (real runs) ------------------------------------------------------------

@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """(package sources: a dependency's wheel the test writes and the worker's pytest, the venv cache)."""
    deps = tmp_path_factory.mktemp("deps")
    write_wheel(deps, "tinydep", "1.0", {"tinydep/__init__.py": b"ONE = 1\n"})
    runner = repack_installed(tmp_path_factory.mktemp("runner-wheels"), ["pytest"])[0].parent
    return PackageSources(find_links=(deps,), runner_wheels=runner), tmp_path_factory.getbasetemp() / "repo-envs"


def _prepared(root: Path, offline, configured: str | None = None) -> dict:
    sources, cache = offline
    return prepare_repository(root, configured=configured, cache_dir=cache, sources=lambda command: sources,
                              limits=LIMITS)


def _files(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def test_a_tox_command_with_coverage_and_its_deps_gives_a_baseline_that_ran(tmp_path, offline):
    # cachetools 8.0.3's shape: before, `term-missing` was a path, pytest-cov absent, and 0 tests "passed"
    root = _files(tmp_path, {
        "tox.ini": """\
            [testenv]
            deps = tinydep
            commands = py.test --basetemp={envtmpdir} --cov=calc --cov-report term-missing {posargs}
            """,
        "pyproject.toml": '[project]\nname = "calc"\n', "calc.py": CALC,
        "tests/test_calc.py": "import tinydep\n\nfrom calc import add\n\n\ndef test_add():\n"
                              "    assert add(tinydep.ONE, 1) == 2\n"})

    prepared = _prepared(root, offline)

    assert prepared["baseline"]["passing"] == ("tests/test_calc.py::test_add",)
    assert prepared["environment"]["requirements"] == ("tinydep",)
    assert prepared["test_command"]["dropped"] == ("--basetemp={envtmpdir}", "--cov=calc", "--cov-report term-missing")


def test_a_module_that_cannot_import_does_not_hide_the_others_outcomes(tmp_path, offline):
    # idna 3.21's shape: one module imports what is not installed; before, "Interrupted: 1 error during collection"
    root = _files(tmp_path, {"calc.py": CALC, "conftest.py": "",
                             "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 1) == 2\n",
                             "tests/test_props.py": "import not_installed_here\n\n\ndef test_prop():\n    pass\n"})

    prepared = _prepared(root, offline)

    assert prepared["runs"][0] == {"tests/test_calc.py::test_add": P, "tests/test_props.py": E}
    assert [report["exit_code"] for report in prepared["reports"]] == [1, 1]
    after = compare(baseline_from(*prepared["runs"]), {"tests/test_calc.py::test_add": P, "tests/test_props.py": E})
    assert after.ok and after.broken == () and after.added == ()  # the module's error was there before: not the change's


@pytest.mark.parametrize(("files", "configured", "words", "tail"), [
    ({"tests/test_a.py": "def test_a():\n    pass\n"}, "pytest --no-such-option tests",
     "pytest refused its command line or configuration (exit 4, a usage error): set the project's test_command",
     "unrecognized arguments: --no-such-option"),
    ({"tests/test_a.py": "def test_a():\n    assert False\n", "conftest.py": ""}, None,
     "no test passed in both base runs (0 passed, 1 failed, 0 errors, 0 skipped in the first)", "assert False"),
    # more-itertools 11.2.1's shape: pytest's INTERNALERROR on a MemoryError, read before as a forged report
    ({"tests/test_a.py": "def test_a():\n    pass\n", "conftest.py": """\
        def pytest_runtest_logreport(report):
            if report.when == "call":
                raise MemoryError
        """}, None, "pytest stopped with an internal error (exit 3): the tests ran out of memory (MemoryError in "
                    "the output): raise AITEAM_SANDBOX_MEMORY_MB (now 1024 MB of address space per process)",
     "INTERNALERROR> MemoryError"),
    ({"tests/test_a.py": "def test_a():\n    pass\n"}, "pytest no_such_dir",  # found once the session started
     "exit 4", "file or directory not found: no_such_dir"),
    ({"tests/test_a.py": "def test_a():\n    pass\n", "docs/conf.py": ""}, "pytest docs",
     "the base commit's test run reported no test of the repository: check the test command's paths", "collected"),
    # tomlkit 0.15.3's shape: pytest 7 stopped on the runner's own option before its session, exit 1, and the empty
    # outcomes were kept as a baseline that judged nothing
    ({"tests/test_a.py": "def test_a():\n    pass\n", "conftest.py": "raise SystemExit('stopped here')\n"}, None,
     "pytest stopped before its session started (exit 1), so no test ran: the output ends on `stopped here`",
     "stopped here"),
    ({"tests/test_a.py": "def test_a():\n    pass\n"}, "pytest -p not_installed_plugin tests",
     "(exit 4, a usage error): the output shows `Error importing plugin \"not_installed_plugin\": No "
     "module named 'not_installed_plugin'`: a module the tests import is missing", "not_installed_plugin"),
    ({"tests/test_a.py": "def test_a():\n    pass\n", "conftest.py": "import os\n\nos._exit(0)\n"}, None,
     "pytest stopped before its session started (exit 0), so no test ran", ""),
    ({"tests/test_a.py": "def test_a():\n    pass\n", "conftest.py": "import not_installed_here\n"}, None,
     "exit 4, a usage error): a conftest.py could not be imported: the output shows `ModuleNotFoundError: No "
     "module named 'not_installed_here'`: a module the tests import is missing. It must be in the repository's "
     "test dependencies", "ImportError while loading conftest"),
])
def test_a_base_run_that_judges_nothing_is_refused_with_its_output_and_what_to_do(tmp_path, offline, files,
                                                                                   configured, words, tail):
    root = _files(tmp_path, {"setup.py": "", **files})

    with pytest.raises(BaselineUnusable) as refused:
        _prepared(root, offline, configured)

    assert words in str(refused.value) and "forged" not in str(refused.value), str(refused.value)
    assert tail in refused.value.log_tail


@pytest.mark.parametrize(("files", "empty_config"), [
    ({"setup.py": "", "tests/test_a.py": ""}, True),
    ({"setup.cfg": "[tool:pytest]\naddopts = -ra\n", "tests/test_a.py": ""}, False),
    ({"setup.py": "", ".aiteam.toml": '[tests]\ncommand = "pytest -c tests/pytest.ini tests"\n'}, False),
])
def test_a_repository_without_a_pytest_configuration_runs_with_an_empty_one(tmp_path, files, empty_config):
    # pytest 7 resolves -o pythonpath against the configuration file's directory and stops without one
    root = _files(tmp_path, files)
    environment = Environment(tmp_path / "venv", "key", True, 0.0, (), (), ())

    argv = repository_command(tmp_path, environment_runs.repo_tests(root, detect_test_command(root), environment), None)

    assert ("-c" in argv and os.devnull in argv and f"--confcutdir={tmp_path}" in argv) is empty_config
    assert argv.count("-c") == int(empty_config or ".aiteam.toml" in files)  # the repository's own -c stands alone


def test_a_pytest_older_than_7_is_refused_by_its_version_before_any_run(tmp_path, offline, monkeypatch):
    sources, cache = offline
    old = tmp_path / "old"
    write_wheel(old, "pytest", "6.2.5", {"pytest/__init__.py": b""})
    runs = []
    monkeypatch.setattr(environment_runs, "run_repository", lambda *args, **kwargs: runs.append(1))
    root = _files(tmp_path / "repo", {"requirements.txt": "pytest==6.2.5\n", "tests/test_a.py": "def test_a():\n    pass\n"})

    with pytest.raises(BaselineUnusable) as refused:
        prepare_repository(root, configured=None, cache_dir=cache, limits=LIMITS,
                           sources=lambda command: replace(sources, find_links=(*sources.find_links, old)))

    assert str(refused.value).startswith("the repository's test dependencies install pytest 6.2.5: aiteam runs the "
                                         "tests with pytest 7 or later")
    assert "Allow pytest>=7" in str(refused.value) and runs == []


def test_a_given_command_that_reported_no_test_names_the_module_the_output_says_is_missing(tmp_path, offline,
                                                                                          monkeypatch):
    tail = "  File \"settings.py\", line 3\nModuleNotFoundError: No module named 'rest_framework'\n"
    empty = RepoRun(TestReport(exit_code=0, output_tail=tail), {})
    monkeypatch.setattr(environment_runs, "run_repository", lambda *args, **kwargs: empty)
    root = _files(tmp_path, {"setup.py": "", "tests/test_a.py": "def test_a():\n    pass\n"})

    with pytest.raises(BaselineUnusable) as refused:
        _prepared(root, offline, "pytest tests")

    assert str(refused.value) == (
        "the base commit's test run reported no test of the repository: the output shows `ModuleNotFoundError: No "
        "module named 'rest_framework'`: a module the tests import is missing. It must be in the repository's test "
        "dependencies (a requirements file, a test/tests/testing/dev extra, or tox.ini's [testenv] deps), or "
        "importable from the checkout")


def test_a_judged_run_whose_session_never_started_is_not_ok_whatever_its_exit_code():
    # tomlkit 0.15.3's shape after a change: an empty baseline and a run that stopped before its session read as ok
    prepared = {"baseline": {"outcomes": {}, "flaky": [], "passing": []}}
    after = RepoRun(TestReport(exit_code=0, not_started=True, output_tail="RuntimeError: broken\n"), {})

    report = judged_report(after, prepared)

    assert not report["ok"]
    assert report["comparison"]["not_run"] == ("the tests did not run: pytest stopped before its session started "
                                               "(exit 0), so no test ran: the output ends on `RuntimeError: broken`")


def test_unittest_discovery_in_a_src_layout_imports_the_checkout_not_an_installed_release(tmp_path, offline):
    # zope.interface 8.7's shape: a docs extra installed the released package; the tests imported it, not the checkout
    sources, cache = offline
    released = tmp_path / "released"
    write_wheel(released, "ns.calc", "1.0", {"ns/calc/__init__.py": b'WHERE = "installed"\n'})
    root = _files(tmp_path / "repo", {
        "requirements.txt": "ns.calc\n", "tox.ini": "[testenv]\ncommands = python -m unittest discover -s src/ns\n",
        "src/ns/calc/__init__.py": 'WHERE = "checkout"\n', "src/ns/calc/tests/__init__.py": "",
        "src/ns/calc/tests/test_where.py": """\
            import unittest

            from ns.calc import WHERE


            class T(unittest.TestCase):
                def test_where(self):
                    self.assertEqual(WHERE, "checkout")
            """})

    prepared = prepare_repository(root, configured=None, cache_dir=cache, limits=LIMITS,
                                  sources=lambda command: replace(sources, find_links=(*sources.find_links, released)))

    assert prepared["runs"][0] == {"src/ns/calc/tests/test_where.py::T::test_where": P}


def test_a_repository_with_no_tests_yet_still_has_a_baseline(tmp_path, offline):
    prepared = _prepared(_files(tmp_path, {"tool.py": "print(1)\n"}), offline)

    assert prepared["runs"] == [{}, {}] and prepared["test_command"]["source"].startswith("no test files yet")


@pytest.mark.parametrize("files", [
    {"pyproject.toml": '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\naddopts = "-ra"\n',
     "tests/__init__.py": ""},  # pytest configured, no test written yet
    {"setup.py": "", "tox.ini": "[testenv]\ncommands = pytest tests\n", "tests/__init__.py": ""},
])
def test_a_configured_runner_with_no_tests_yet_keeps_an_empty_baseline(tmp_path, offline, files):
    prepared = _prepared(_files(tmp_path, {"calc.py": "def add(a, b):\n    return a + b\n", **files}), offline)

    assert prepared["runs"] == [{}, {}]


def test_a_suite_whose_tests_all_skip_here_keeps_its_baseline(tmp_path, offline):
    root = _files(tmp_path, {"setup.py": "", "tests/test_db.py": "import pytest\n\n\n@pytest.mark.skip('needs "
                             "a database')\ndef test_query():\n    pass\n"})

    prepared = _prepared(root, offline)

    assert prepared["runs"][0] == {"tests/test_db.py::test_query": "skipped"}


def test_failing_subtests_fail_their_test_and_a_childs_python_imports_the_checkout(tmp_path, offline):
    # the audit's shape: a failing unittest subTest read before as a forged report; a test that runs its package
    # with sys.executable (ModuleNotFoundError: the checkout was only on pytest's own sys.path)
    root = _files(tmp_path, {"setup.py": "", "calc.py": CALC, "tests/test_calc.py": """\
        import subprocess
        import sys
        import unittest


        class T(unittest.TestCase):
            def test_parts(self):
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertNotEqual(i, 1)

            def test_fine(self):
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertTrue(True)


        def test_child():
            subprocess.run([sys.executable, "-c", "import calc"], check=True)
        """})

    prepared = _prepared(root, offline)

    assert prepared["runs"][0] == {"tests/test_calc.py::T::test_parts": F, "tests/test_calc.py::T::test_fine": P,
                                   "tests/test_calc.py::test_child": P}
    assert [report["tampered"] for report in prepared["reports"]] == [[], []]


def test_a_tox_changedir_makes_its_directory_importable_for_the_tests_children_too(tmp_path, offline):
    # typing_extensions 4.16.0's shape: `changedir = src` ignored, a test's own python could not import the module
    root = _files(tmp_path, {"pyproject.toml": '[project]\nname = "calc"\n', "src/calc.py": CALC,
                             "tox.ini": "[testenv]\nchangedir = src\ncommands = python -m unittest discover\n",
                             "src/test_calc.py": """\
        import subprocess
        import sys
        import unittest


        class T(unittest.TestCase):
            def test_child(self):
                subprocess.run([sys.executable, "-c", "import calc"], check=True)
        """})

    prepared = _prepared(root, offline)

    assert prepared["runs"][0] == {"src/test_calc.py::T::test_child": P}


def test_a_suite_too_large_for_the_outcome_stream_is_refused_as_such_not_as_forged(tmp_path, offline, monkeypatch):
    monkeypatch.setattr(stream, "MAX_STREAM_BYTES", 2000)  # ~30 reports; the canaries' alone are 6
    root = _files(tmp_path, {"setup.py": "", "tests/test_many.py": """\
        import pytest


        @pytest.mark.parametrize("n", range(40))
        def test_n(n):
            pass
        """})

    with pytest.raises(BaselineUnusable) as refused:
        _prepared(root, offline)

    assert "cannot be judged: the outcome stream passed its bound of" in str(refused.value)
    assert "too large" in str(refused.value) and "test_command" in str(refused.value)
    assert "forged" not in str(refused.value), refused.value


def test_a_base_run_past_the_time_limit_is_refused_once_with_the_figure_and_what_to_raise(tmp_path, offline,
                                                                                          monkeypatch):
    root = _files(tmp_path, {"conftest.py": "", "tests/test_slow.py": "import time\n\n\ndef test_slow():\n"
                                                                     "    time.sleep(60)\n"})
    sources, cache = offline
    runs = []
    real = environment_runs.run_repository

    def counted(*args, **kwargs):
        runs.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(environment_runs, "run_repository", counted)

    with pytest.raises(BaselineUnusable) as refused:
        prepare_repository(root, configured=None, cache_dir=cache, sources=lambda command: sources,
                           limits=SandboxLimits(timeout_s=3, cpu_s=30, memory_bytes=1024**3, max_output_chars=8000))

    assert str(refused.value).startswith("the base commit's test run (1 of 2) was stopped at the sandbox's time "
                                         "limit after ")
    assert "(AITEAM_SANDBOX_TIMEOUT_S, now 3 s)" in str(refused.value)
    assert "AITEAM_STEP_SOFT_LIMIT_S" in str(refused.value)
    assert len(runs) == 1  # the second base run, stopped there too, is not started
