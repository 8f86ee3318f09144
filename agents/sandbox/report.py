"""The sandbox's result (an artifact stored as JSON) and the parsing of pytest's junit XML.

Everything read here was written by the untrusted run, so files are opened without
following symlinks (a link to a FIFO or /dev/zero would hang or exhaust the worker), must
be regular and are size-capped. ElementTree does not fetch external entities and the
bundled expat (>= 2.4.1) refuses "billion laughs" expansion.
"""
from __future__ import annotations

import os
import stat
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from itertools import islice
from pathlib import Path
from typing import Any

from agents.schemas.quality import ACCEPTANCE_DIR

MAX_READ_BYTES = 32 * 1024**2
MAX_TEST_IDS = 500  # per list: the report is stored and the failing ids reach the engineer's context


@dataclass
class TestReport:
    __test__ = False  # a Test* class: keep pytest from trying to collect it where it is imported

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failing_tests: list[str] = field(default_factory=list)  # "path/to/test_x.py::test_name"; errors included
    tests_run: list[str] = field(default_factory=list)  # every test that ran (not skipped), ids as above
    failing_tests_total: int = 0  # how many failing ids there were: more than len(failing_tests) when cut
    tests_run_total: int = 0  # likewise for tests_run
    duration_s: float = 0.0
    coverage_percent: float | None = None
    exit_code: int = 0
    timed_out: bool = False
    killed_reason: str = ""  # "", "timeout", "cpu", "memory", "file size" or "signal N"
    output_tail: str = ""
    isolation: str = ""
    tampered: list[str] = field(default_factory=list)  # why the run's own report cannot be believed (canary.py)
    unjudged: str = ""  # why its outcomes cannot be judged though not forged: a suite too large for the stream
    # pytest never started its session (it stopped while reading its configuration or the conftests): no test ran,
    # the canaries included, whatever the exit code
    not_started: bool = False

    def __post_init__(self) -> None:
        """Cap both lists at MAX_TEST_IDS (a junit file of up to MAX_READ_BYTES can name ~10^5 tests), counting
        first. The gate's own inputs are kept before the rest: a module that failed to import, and the
        acceptance tests that ran (agents.quality.uncovered)."""
        self.failing_tests_total = max(self.failing_tests_total, len(self.failing_tests))
        self.tests_run_total = max(self.tests_run_total, len(self.tests_run))
        self.failing_tests = _capped(self.failing_tests, first=lambda test: "::" not in test)
        self.tests_run = _capped(self.tests_run, first=lambda test: test.startswith(ACCEPTANCE_DIR))

    @property
    def ok(self) -> bool:
        return (self.exit_code == 0 and self.failed == 0 and self.errors == 0 and self.passed > 0 and not self.timed_out
                and not self.tampered and not self.unjudged)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}  # "ok" is for readers of the JSON; from_dict ignores it

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestReport:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class JunitOutcome:
    passed: int
    failed: int
    errors: int
    skipped: int
    failing_tests: list[str]
    tests_run: list[str]


def read_untrusted(path: Path, max_bytes: int = MAX_READ_BYTES) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        return handle.read(max_bytes)


@dataclass(frozen=True)
class Case:
    """One testcase of a junit file, as written: what a default run's outcome stream is checked against."""

    classname: str
    name: str
    kind: str  # "passed", "failed", "errors" or "skipped"
    message: str  # the failure's or error's message attribute, "" otherwise


def read_cases(path: Path) -> list[Case] | None:
    """None when the report is missing or unreadable (the run crashed or was killed before pytest wrote it)."""
    data = read_untrusted(path)
    if data is None:
        return None
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        return None
    cases = []
    for case in root.iter("testcase"):
        kind = _kind(case)
        problem = case.find("error" if kind == "errors" else "failure")
        message = problem.get("message", "") if problem is not None else ""
        cases.append(Case(case.get("classname", ""), case.get("name", ""), kind, message))
    return cases


def outcome_of(cases: list[Case], project: Path) -> JunitOutcome:
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failing: list[str] = []
    ran: list[str] = []
    for case in cases:
        counts[case.kind] += 1
        if case.kind == "skipped":
            continue
        ran.append(junit_test_id(case.classname, case.name, project))
        if case.kind in ("failed", "errors"):
            failing.append(ran[-1])
    return JunitOutcome(failing_tests=failing, tests_run=ran, **counts)


def parse_junit(path: Path, project: Path) -> JunitOutcome | None:
    """None when the report is missing or unreadable (the run crashed or was killed before pytest wrote it)."""
    cases = read_cases(path)
    return None if cases is None else outcome_of(cases, project)


def _capped(tests: list[str], *, first: Callable[[str], bool]) -> list[str]:
    """At most MAX_TEST_IDS of `tests`, those matching `first` chosen before the others, in their run order."""
    if len(tests) <= MAX_TEST_IDS:
        return tests
    chosen = [i for i, test in enumerate(tests) if first(test)][:MAX_TEST_IDS]
    rest = (i for i, test in enumerate(tests) if not first(test))
    chosen += islice(rest, MAX_TEST_IDS - len(chosen))
    return [tests[i] for i in sorted(chosen)]


def _kind(case: ET.Element) -> str:
    # A test that fails and then errors in teardown has both elements; the error is the stronger signal.
    if case.find("error") is not None:
        return "errors"
    if case.find("failure") is not None:
        return "failed"
    if case.find("skipped") is not None:
        return "skipped"
    return "passed"


def junit_test_id(classname: str, name: str, project: Path) -> str:
    """Back from junit's dotted "pkg.test_mod.TestClass" + "test_x" to pytest's "pkg/test_mod.py::TestClass::test_x".

    pytest's junit (xunit2) drops the file path; the longest dotted prefix that is a .py file in the
    project is the module. A collection error has an empty classname and the module as its name.
    """
    if not classname:
        return name.replace(".", "/") + ".py"
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        module = "/".join(parts[:cut]) + ".py"
        if (project / module).is_file():
            return "::".join([module, *parts[cut:], name])
    return "::".join(["/".join(parts) + ".py", name])
