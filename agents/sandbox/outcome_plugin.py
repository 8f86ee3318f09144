"""A pytest plugin the runner copies into each default run: it writes every test's outcome, as it happens, to a pipe
the worker holds (``stream.py``). Not part of the project, never imported by the worker: the run loads it with -p
from the root-owned canary directory, before any of the project's code is imported.

A line written to the pipe cannot be taken back. Code under test that later rewrites the junit file, or writes
lines of its own, leaves the real outcome standing beside the forged one, and the worker calls that conflict
tampered. Lines are JSON objects of at most a few hundred bytes (one ``write`` each, atomic below PIPE_BUF).
"""
import os
from collections.abc import Generator
from json import dumps
from os import write

import pytest

FD_VARIABLE = "AITEAM_OUTCOME_FD"
_MESSAGE_CHARS = 300  # enough for the canary's nonce; the output tail has the rest
# A subtest's report (unittest's subTest, the subtests fixture) carries its test's node id and "call": pytest 9's
# own, and the pytest-subtests plugin's before it. One test has as many of them as it ran subtests.
_SUBTEST_REPORTS = ("SubtestReport", "SubTestReport")

# Taken at load, before the project's code runs: a test's child process does not inherit the pipe (it would keep the
# worker reading after the run), and a later patch of json.dumps or os.write does not reach the bound names.
_FD = int(os.environ.pop(FD_VARIABLE, "-1"))
if _FD >= 0:
    os.set_inheritable(_FD, False)


def _send(**fields: object) -> None:
    line = (dumps(fields, separators=(",", ":")) + "\n").encode()
    while line:  # a failed write (a closed descriptor) raises: pytest stops, and the stream shows it never finished
        line = line[write(_FD, line):]


def _message(report: pytest.CollectReport | pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    return str(crash.message if crash is not None else report.longrepr)[:_MESSAGE_CHARS]


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # old-style: a repository's pytest may predate wrapper=True
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Generator[None, None, None]:
    """The runner's canaries, in this file's directory, run after every other test once the installed plugins reordered
    them (pytest-randomly's, pytest-django's; a conftest's own wrapper can still reorder after): a patch
    installed while the tests run is in place when they run, and their letters are the last of pytest's progress
    (the worker takes them out of the output it shows). A repository's -m or -k (its addopts, its command) selects
    among its own tests: the canaries, which it deselected too, run all the same."""
    here = os.path.dirname(os.path.realpath(__file__))
    theirs = [item for item in items  # .path from pytest 7, .fspath before
              if os.path.dirname(os.path.realpath(str(getattr(item, "path", None) or item.fspath))) == here]
    yield  # every other implementation first (pytest's own -k and -m deselection among them)
    if theirs:
        items[:] = [item for item in items if item not in theirs] + theirs


def pytest_configure(config: pytest.Config) -> None:
    """A test's own python (``subprocess.run([sys.executable, ...])``) imports the checkout as pytest does: its
    importable roots, which the runner gives pytest's pythonpath setting (pytest 7 on), become PYTHONPATH here, once
    pytest itself is imported (on the run's own PYTHONPATH a project module could stand in for it)."""
    try:
        roots = config.getini("pythonpath")
    except ValueError:  # pytest before 7 knows no such setting
        return
    os.environ["PYTHONPATH"] = os.pathsep.join(map(str, roots))


def pytest_sessionstart(session: pytest.Session) -> None:
    _send(event="start")


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if not report.passed:  # a module that failed to import or skipped itself; the junit file lists it too
        _send(id=report.nodeid, when="collect", outcome=report.outcome, message=_message(report))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Only what differs from a plain pass is written (xfail, sub, message): an honest suite of tens of thousands of
    # tests must fit the worker's bound on the stream.
    fields: dict[str, object] = {"id": report.nodeid, "when": report.when, "outcome": report.outcome}
    if hasattr(report, "wasxfail"):
        fields["xfail"] = True
    if type(report).__name__ in _SUBTEST_REPORTS:
        fields["sub"] = True
    if report.failed:
        fields["message"] = _message(report)
    _send(**fields)


@pytest.hookimpl(trylast=True)  # after the junit file is written: a run that dies writing it has not finished
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _send(event="finish", exitstatus=int(exitstatus))
