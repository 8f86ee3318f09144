"""Code under test that forges a passing report, through the real sandbox runner and real pytest.

Each project is a small shelf of books whose duplicate-ISBN check is missing, so one of its tests fails; its
package's ``__init__.py`` then tampers with the run in a different way. Before the canaries each of these runs
reported every test passing (``ok``); now each is ``tampered`` and not ok, while honest runs, failing or passing,
are judged as before. Tampering before a test's outcome is reported is the canaries' to catch; rewriting the
results afterwards is the outcome stream's (agents/sandbox/stream.py): the figures stay the true ones.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from agents.sandbox import SandboxLimits, TestReport, run_tests
from agents.sandbox.canary import CANARY_DIR_PREFIX, SESSION_TEARDOWN

pytestmark = pytest.mark.xdist_group("sandbox_uid")  # with the other sandbox modules: one run at a time
LIMITS = SandboxLimits(timeout_s=20, cpu_s=20, memory_bytes=1024**3, max_processes=32, max_output_chars=4000)

BOOKS = """\
class Shelf:
    def __init__(self):
        self.books = {}

    def add(self, isbn, title):
        self.books[isbn] = title  # the stories ask for a refusal of a duplicate ISBN: missing
"""
TESTS = """\
import pytest

from shelf.books import Shelf


def test_adds_a_book():
    shelf = Shelf()
    shelf.add("978-0", "Dune")
    assert shelf.books == {"978-0": "Dune"}


def test_refuses_a_duplicate_isbn():
    shelf = Shelf()
    shelf.add("978-0", "Dune")
    with pytest.raises(ValueError):
        shelf.add("978-0", "Emma")


class TestListing:
    def test_lists_titles(self):
        shelf = Shelf()
        shelf.add("1", "A")
        assert list(shelf.books.values()) == ["A"]
"""

NO_OP_RUNTEST = """\
import _pytest.python

_pytest.python.Function.runtest = lambda self: None
"""
# After pytest wrote the report: drop every failure from it.
REWRITE_JUNIT_AT_EXIT = """\
import atexit
import re
import sys


def _green():
    path = next(arg.split("=", 1)[1] for arg in sys.argv if arg.startswith("--junitxml="))
    with open(path) as handle:
        text = handle.read()
    text = re.sub(r"<failure.*?</failure>", "", text, flags=re.S)
    with open(path, "w") as handle:
        handle.write(re.sub(r'failures="\\d+"', 'failures="0"', text))


atexit.register(_green)
"""
# A report of its own naming the project's tests, then out before anything else can run.
FAKE_JUNIT_AND_EXIT = """\
import atexit
import os
import sys

CASES = [("tests.test_books", "test_adds_a_book"), ("tests.test_books", "test_refuses_a_duplicate_isbn"),
         ("tests.test_books.TestListing", "test_lists_titles")]


def _fake():
    path = next(arg.split("=", 1)[1] for arg in sys.argv if arg.startswith("--junitxml="))
    cases = "".join(f'<testcase classname="{c}" name="{n}" />' for c, n in CASES)
    with open(path, "w") as handle:
        handle.write(f'<testsuites><testsuite tests="3">{cases}</testsuite></testsuites>')
    os._exit(0)


atexit.register(_fake)
"""
# A plugin registered from product code: every test's report says passed.
MAKEREPORT_PLUGIN = """\
import gc

import pytest
from _pytest.config import Config


class _AllGreen:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        report.outcome, report.longrepr = "passed", None


_config = next(o for o in gc.get_objects() if isinstance(o, Config))
_config.pluginmanager.register(_AllGreen())
"""
# The reviewer's attack on the first canaries: plain literals only (the check at review finds nothing), spares the
# canaries' test cases, and runs at interpreter exit, after pytest wrote the report and its exit code.
REVIEWERS_FINALIZE = BOOKS + """

import os
import re
import weakref


def _green():
    for name in os.listdir("."):
        if name.endswith(".xml"):
            with open(name) as handle:
                text = handle.read()
            def keep(match):
                return match.group(0) if 'classname="~' in match.group(0) else \\
                    re.sub(r"<failure.*?</failure>", "", match.group(0), flags=re.S)
            text = re.sub(r"<testcase .*?(?:/>|</testcase>)", keep, text, flags=re.S)
            with open(name, "w") as handle:
                handle.write(re.sub(r'failures="\\\\d+"', 'failures="1"', text))


_anchor = Shelf()
weakref.finalize(_anchor, _green)
"""
# The report emptied at exit: nothing left to compare with.
TRUNCATE_AT_EXIT = """\
import os
import weakref


def _empty():
    for name in os.listdir("."):
        if name.endswith(".xml"):
            open(name, "w").close()


class _Anchor:
    pass


_anchor = _Anchor()
weakref.finalize(_anchor, _empty)
"""
# The outcome pipe is the one pipe among the run's descriptors: forge a pass into it before the test runs.
FIND_THE_PIPE = """\
import json
import os


def _pipe():
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                return fd
        except OSError:
            pass
"""
FORGED_LINES = FIND_THE_PIPE + """
for _when in ("setup", "call", "teardown"):
    _line = {"id": "tests/test_books.py::test_refuses_a_duplicate_isbn", "when": _when, "outcome": "passed"}
    os.write(_pipe(), (json.dumps(_line) + "\\n").encode())
"""
CLOSED_PIPE = FIND_THE_PIPE + """
os.close(_pipe())
"""
# Leave the canaries alone, drop the failing test from the run instead.
DESELECT_PLUGIN = MAKEREPORT_PLUGIN.replace("""    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        report.outcome, report.longrepr = "passed", None
""", """    def pytest_collection_modifyitems(self, items):
        items[:] = [item for item in items if "duplicate" not in item.name]
""")
# Installed only once the tests run, by the code they call: later tests pass, earlier ones ran honestly.
PATCHED_WHILE_RUNNING = BOOKS + """

def _tamper():
    import _pytest.python
    _pytest.python.Function.runtest = lambda self: None


_tamper_once = [_tamper]


def _first_call(*args):
    while _tamper_once:
        _tamper_once.pop()()
"""


# Every kind of outcome an honest run can have, in pytest's own words.
VARIETY = """\
import pytest


@pytest.fixture
def broken():
    raise RuntimeError("setup")


@pytest.fixture
def breaks_after():
    yield
    raise RuntimeError("teardown")


@pytest.mark.parametrize("word", ["a::b", "\u00e9", "x[1]"])
def test_param(word):
    assert word


@pytest.mark.xfail(reason="known")
def test_expected_to_fail():
    assert False


@pytest.mark.xfail(reason="fixed since")
def test_unexpectedly_passes():
    pass


@pytest.mark.xfail(strict=True)
def test_strict_xpass():
    pass


@pytest.mark.skip(reason="later")
def test_skipped():
    pass


def test_setup_error(broken):
    pass


def test_fails_then_teardown_errors(breaks_after):
    assert False


def test_passes_then_teardown_errors(breaks_after):
    pass


class TestGroup:
    def test_in_class(self):
        pytest.skip("inside")
"""


def _project(tmp_path: Path, init: str = "", books: str = BOOKS, tests: str = TESTS) -> Path:
    source = tmp_path / "project"
    (source / "shelf").mkdir(parents=True)
    (source / "tests").mkdir()
    (source / "shelf" / "__init__.py").write_text(init)
    (source / "shelf" / "books.py").write_text(books)
    (source / "tests" / "test_books.py").write_text(tests)
    return source


def _run(source: Path) -> TestReport:
    return run_tests(source, limits=LIMITS)


@pytest.fixture(autouse=True)
def _unisolated_runs_allowed(settings):
    settings.AITEAM_SANDBOX_ALLOW_UNISOLATED = True  # a non-root machine still runs them (isolation is not the point)


def test_an_honest_failing_run_is_a_plain_failure(tmp_path):
    report = _run(_project(tmp_path))
    assert (report.passed, report.failed, report.tampered, report.exit_code) == (2, 1, [], 1)
    assert report.failing_tests == ["tests/test_books.py::test_refuses_a_duplicate_isbn"]
    assert not any(CANARY_DIR_PREFIX in test for test in report.tests_run)  # the canaries are not the project's
    assert CANARY_DIR_PREFIX not in report.output_tail and "1 failed, 2 passed in" in report.output_tail


def test_an_honest_passing_run_still_passes(tmp_path):
    fixed = BOOKS.replace("        self.books[isbn] = title", "        if isbn in self.books:\n"
                          "            raise ValueError(isbn)\n        self.books[isbn] = title")
    report = _run(_project(tmp_path, books=fixed))
    assert report.ok and (report.passed, report.failed, report.tampered, report.exit_code) == (3, 0, [], 0)
    assert report.coverage_percent in (None, 100.0)  # the canaries are not measured either


def test_a_session_fixture_failing_at_teardown_is_the_projects_error_not_tampering(tmp_path):
    """A session-scoped fixture ends in the last test's teardown, which is a canary's: the error is the project's,
    reported as one, and the canaries still check the run (the must-fail one failed with its nonce first)."""
    source = _project(tmp_path, books=BOOKS.replace("        self.books[isbn] = title", "        if isbn in self.books:\n"
                                                    "            raise ValueError(isbn)\n        self.books[isbn] = title"))
    (source / "tests" / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.fixture(scope='session', autouse=True)\ndef database():\n    yield\n"
        "    raise RuntimeError('the database did not close')\n")

    report = _run(source)

    assert report.tampered == [] and not report.ok
    assert (report.passed, report.failed, report.errors) == (3, 0, 1)
    assert report.failing_tests == [SESSION_TEARDOWN]
    assert "RuntimeError: the database did not close" in report.output_tail  # its cause, for the reader
    assert CANARY_DIR_PREFIX not in report.output_tail and "3 passed, 1 error in" in report.output_tail


def test_an_honest_run_of_every_outcome_kind_agrees_with_its_junit_file(tmp_path):
    """pytest's junit file has quirks (an xfail is a skip, a failure then a teardown error is two testcases);
    the stream is read the same way, so an honest run is never called tampered for them."""
    source = tmp_path / "project"
    (source / "tests").mkdir(parents=True)
    (source / "tests" / "test_variety.py").write_text(VARIETY)
    (source / "tests" / "test_skipped_module.py").write_text(
        "import pytest\n\npytest.skip('later', allow_module_level=True)\n\n\ndef test_never():\n    pass\n")
    report = _run(source)
    assert report.tampered == [] and (report.passed, report.failed, report.errors, report.skipped) == (4, 1, 3, 4)
    assert report.exit_code == 1 and "2 failed, 4 passed, 3 skipped, 1 xfailed, 1 xpassed, 3 errors" in \
        report.output_tail  # what pytest printed, the canaries counted out


@pytest.mark.parametrize("init", [NO_OP_RUNTEST, MAKEREPORT_PLUGIN], ids=["no-op runtest", "makereport plugin"])
def test_a_pass_forged_before_it_is_reported_is_caught_by_the_canary(tmp_path, init):
    report = _run(_project(tmp_path, init=init))
    # what the run itself claims: every test passed, which is what the gate used to believe
    assert (report.passed, report.failed, report.errors) == (3, 0, 0)
    assert not report.ok
    assert any("must have failed is reported passed" in reason for reason in report.tampered), report.tampered


@pytest.mark.parametrize("init, books, because", [
    ("", REVIEWERS_FINALIZE, "on 1 test(s): tests/test_books.py::test_refuses_a_duplicate_isbn (streamed failed, "
                             "junit passed)"),
    (REWRITE_JUNIT_AT_EXIT, BOOKS, "the junit report disagrees with the streamed outcomes on 2 test(s)"),
    (FAKE_JUNIT_AND_EXIT, BOOKS, "the junit report disagrees with the streamed outcomes on 3 test(s)"),
    (TRUNCATE_AT_EXIT, BOOKS, "the junit report is missing or unreadable though pytest ended its session"),
], ids=["reviewer's weakref.finalize", "junit rewritten at exit", "fake junit and os._exit(0)", "junit emptied"])
def test_results_rewritten_after_the_fact_are_caught_and_the_figures_stay_true(tmp_path, init, books, because):
    report = _run(_project(tmp_path, init=init, books=books))
    assert (report.passed, report.failed, report.exit_code) == (2, 1, 1)  # from the stream, whatever the file says
    assert report.failing_tests == ["tests/test_books.py::test_refuses_a_duplicate_isbn"] and not report.ok
    assert any(because in reason for reason in report.tampered), report.tampered


def test_a_pass_written_into_the_outcome_pipe_conflicts_with_the_real_failure(tmp_path):
    report = _run(_project(tmp_path, init=FORGED_LINES))
    assert (report.passed, report.failed) == (2, 1) and not report.ok
    assert report.tampered == ["line 9 of the outcome stream reports tests/test_books.py::test_refuses_a_duplicate_isbn"
                               " (call) failed after passed: a second, conflicting outcome"]


def test_an_outcome_pipe_closed_by_the_code_under_test_is_caught(tmp_path):
    report = _run(_project(tmp_path, init=CLOSED_PIPE))
    assert not report.ok and report.passed == 0
    assert any("the outcome stream was cut after 0 test(s)" in reason for reason in report.tampered), report.tampered


def test_a_failing_test_dropped_from_the_run_is_caught(tmp_path):
    report = _run(_project(tmp_path, init=DESELECT_PLUGIN))
    assert (report.passed, report.failed) == (2, 0) and not report.ok
    assert report.tampered == ["1 test(s) the project's files define are missing from the report, first: "
                               "tests/test_books.py::test_refuses_a_duplicate_isbn"]


def test_a_patch_installed_while_the_tests_run_is_caught_by_the_last_canary(tmp_path):
    tests = "from shelf.books import _first_call\n\n\ndef test_aaa_first():\n    _first_call()\n\n\n" + TESTS
    report = _run(_project(tmp_path, books=PATCHED_WHILE_RUNNING, tests=tests))
    assert report.failed == 0 and not report.ok
    assert any("must have failed is reported passed" in reason for reason in report.tampered)


def test_a_module_that_cannot_import_is_an_error_not_tampering(tmp_path):
    report = _run(_project(tmp_path, init="import not_installed_anywhere\n"))
    assert report.errors == 1 and report.tampered == [] and not report.ok and report.exit_code == 2
