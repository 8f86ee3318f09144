"""Each test's outcome as it happened, streamed by ``outcome_plugin.py`` through a pipe the worker holds.

The junit file is written by the process that runs the code under test, at the end, and anything in that process
can rewrite it afterwards (an ``atexit`` hook, a ``weakref.finalize`` callback, a non-daemon thread). A pipe cannot
be rewritten: what the plugin wrote when a test finished is in the worker's buffer whatever runs later. Code
under test can write lines of its own, never remove the real ones, so a test reported twice with different
outcomes, or a junit file that disagrees with the stream, is forgery. A stream that stops before pytest's end of
session while the run exited by itself means the channel was cut. The worker reads in a thread into a bounded
buffer, so the writer never blocks on a full pipe; a run that overflows it cannot be judged (too large, which is
not forgery: ``too_large``).
"""
from __future__ import annotations

import json
import os
import re
import select
import threading
import time
from dataclasses import dataclass, field

from agents.sandbox.report import Case, JunitOutcome

FD_VARIABLE = "AITEAM_OUTCOME_FD"  # outcome_plugin.py reads it (that file runs only in the sandbox: never imported here)
MAX_STREAM_BYTES = 16 * 1024**2  # ~60,000 passing tests at three ~90-byte reports each: more than most suites
MAX_LINE_BYTES = 64 * 1024
_DRAIN_S = 1.0  # after the run is killed, how long its last bytes may take to arrive
# Stronger last, as junit reads them: a test that failed and then errored in teardown counts as an error.
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "errors": 3}


class OutcomePipe:
    """The read end stays in the worker; the write end goes to the run (``Popen(pass_fds=...)``) and is closed here
    once the run has it. Order: ``OutcomePipe()``, start the run, ``reading()``, the run ends, ``collected()``,
    and ``close()`` in every case. The thread starts only after the fork: the runner's ``preexec_fn`` is not safe
    in a parent that has other threads."""

    def __init__(self) -> None:
        self._read, self.write_fd = os.pipe()
        self._open = [self._read, self.write_fd]
        self._chunks: list[bytes] = []
        self._size = 0
        self.overflowed = False
        self._stop_at: float | None = None
        self._thread = threading.Thread(target=self._drain, name="sandbox-outcomes", daemon=True)

    def environment(self) -> dict[str, str]:
        return {FD_VARIABLE: str(self.write_fd)}

    def reading(self) -> None:
        os.close(self.write_fd)  # else our own copy keeps the pipe open and the end of the run never shows
        self._open.remove(self.write_fd)
        self._thread.start()

    def collected(self) -> bytes:
        """What the run wrote, up to MAX_STREAM_BYTES. Call once the run and the processes it started are gone."""
        self._stop(_DRAIN_S)
        return b"".join(self._chunks)

    def close(self) -> None:
        self._stop(0)
        for fd in self._open:
            os.close(fd)
        self._open.clear()

    def _stop(self, patience_s: float) -> None:
        if self._thread.is_alive():
            self._stop_at = time.monotonic() + patience_s
            self._thread.join()

    def _drain(self) -> None:
        # select with a timeout, not a blocking read: a straggler still holding the write end cannot keep us here
        while self._stop_at is None or time.monotonic() < self._stop_at:
            if not select.select([self._read], [], [], 0.05)[0]:
                continue
            chunk = os.read(self._read, 65536)
            if not chunk:
                return
            keep = chunk[:max(MAX_STREAM_BYTES - self._size, 0)]
            self.overflowed |= len(keep) < len(chunk)  # read on regardless: a blocked writer would hang the run
            if keep:
                self._chunks.append(keep)
                self._size += len(keep)


@dataclass
class Streamed:
    """What the stream says. ``outcomes`` maps pytest's node id to its junit-style kind, in the order first seen."""

    outcomes: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)  # the failure message of each failed test
    reports: list[tuple[str, str]] = field(default_factory=list)  # each line's (node id, phase), in the stream's order
    phases: dict[tuple[str, str], str] = field(default_factory=dict)  # (node id, phase) → its first outcome
    xfail: set[str] = field(default_factory=set)
    started: bool = False
    finished: bool = False
    exitstatus: int | None = None  # pytest's own, from the end-of-session line
    forged: list[str] = field(default_factory=list)  # evidence that something else wrote to the stream
    overflowed: bool = False  # more than MAX_STREAM_BYTES: the run cannot be judged (too large, not forged)


def parse(data: bytes, *, overflowed: bool = False) -> Streamed:
    streamed = Streamed(overflowed=overflowed)
    for number, raw in enumerate(data.split(b"\n")[:-1], start=1):  # the last piece is "" or a cut-off line
        problem = _take(_decoded(raw), streamed)
        if problem and len(streamed.forged) < 3:  # a few are enough for whoever looks: it is not believed either way
            streamed.forged.append(f"line {number} of the outcome stream {problem}")
    return streamed


def too_large(streamed: Streamed) -> str:
    """Why an overflowed run cannot be judged, with the figures; "" if it did not overflow."""
    if not streamed.overflowed:
        return ""
    return (f"the outcome stream passed its bound of {round(MAX_STREAM_BYTES / 1024**2, 1):g} MiB after "
            f"{len(streamed.outcomes)} test(s) had reported: the suite is too large to be judged in one run")


def _decoded(raw: bytes) -> dict[str, object] | None:
    if len(raw) > MAX_LINE_BYTES:
        return None
    try:
        line = json.loads(raw)
    except ValueError:
        return None
    return line if isinstance(line, dict) else None


def _take(line: dict[str, object] | None, streamed: Streamed) -> str:
    """Apply one line; a reason if it cannot have come from the plugin alone."""
    if line is None:
        return "is not what the runner's plugin writes"
    if line.get("event") in ("start", "finish"):
        return _session(line, streamed)
    test, when, outcome = line.get("id"), line.get("when"), line.get("outcome")
    if not (isinstance(test, str) and when in ("collect", "setup", "call", "teardown")
            and outcome in ("passed", "failed", "skipped")):
        return "is not what the runner's plugin writes"
    if line.get("sub") is True:
        return _subtest(test, when, outcome, line, streamed)
    streamed.reports.append((test, when))
    _worst(streamed, test, _kind(when, outcome))
    if outcome == "failed" and test not in streamed.messages:
        streamed.messages[test] = str(line.get("message", ""))
    if line.get("xfail"):
        streamed.xfail.add(test)
    if streamed.phases.setdefault((test, when), outcome) != outcome:
        return f"reports {test} ({when}) {outcome} after {streamed.phases[(test, when)]}: a second, conflicting outcome"
    return ""


def _subtest(test: str, when: str, outcome: str, line: dict[str, object], streamed: Streamed) -> str:
    """A subtest's report: one of many under its test's id and phase, so not a second outcome of that phase. A
    failed one fails its test (as pytest counts it); a passed or skipped one leaves the test's own outcome."""
    if outcome == "failed":
        _worst(streamed, test, _kind(when, outcome))
        streamed.messages.setdefault(test, str(line.get("message", "")))
    return ""


def _worst(streamed: Streamed, test: str, kind: str) -> None:
    if _RANK[kind] >= _RANK.get(streamed.outcomes.get(test, "passed"), 0):  # of conflicting lines, the worst counts
        streamed.outcomes[test] = kind


def _session(line: dict[str, object], streamed: Streamed) -> str:
    if line["event"] == "start":
        if streamed.started:
            return "starts the session a second time"
        streamed.started = True
        return ""
    status = line.get("exitstatus")
    if not isinstance(status, int) or (streamed.finished and status != streamed.exitstatus):
        return f"ends the session with status {status!r} after {streamed.exitstatus!r}"
    streamed.finished, streamed.exitstatus = True, status
    return ""


def _kind(when: str, outcome: str) -> str:
    """junit's reading of one report: a failure outside the test's own call is an error."""
    if outcome == "failed":
        return "failed" if when == "call" else "errors"
    return outcome


def outcome_of(streamed: Streamed, tests: list[str]) -> JunitOutcome:
    """The figures of `tests` (node ids of the stream), in the report's shape."""
    counts = dict.fromkeys(_RANK, 0)
    for test in tests:
        counts[streamed.outcomes[test]] += 1
    ran = [test for test in tests if streamed.outcomes[test] != "skipped"]
    failing = [test for test in ran if streamed.outcomes[test] in ("failed", "errors")]
    return JunitOutcome(failing_tests=failing, tests_run=ran, **counts)


def disagreements(streamed: Streamed, cases: list[Case]) -> list[str]:
    """Where the junit file says otherwise than the stream. Both come from the same reports, so an honest run
    agrees test by test; a file rewritten after the fact does not."""
    named = {junit_address(test): test for test in streamed.outcomes}
    wanted = {key: _junit_kind(streamed, test) for key, test in named.items()}
    written: dict[tuple[str, str], str] = {}
    for case in cases:  # a test that failed and errored in teardown has two testcases: the stronger one counts
        key = (case.classname, case.name)
        if _RANK[case.kind] >= _RANK.get(written.get(key, "passed"), 0):
            written[key] = case.kind
    differ = [(key, wanted.get(key, "absent"), written.get(key, "absent")) for key in {**wanted, **written}
              if wanted.get(key) != written.get(key)]
    if not differ:
        return []
    shown = ", ".join(f"{named.get(key) or '::'.join(filter(None, key))} (streamed {a}, junit {b})"
                      for key, a, b in differ[:3])
    return [f"the junit report disagrees with the streamed outcomes on {len(differ)} test(s): {shown}"]


def _junit_kind(streamed: Streamed, test: str) -> str:
    kind = streamed.outcomes[test]
    return "skipped" if kind == "failed" and test in streamed.xfail else kind  # junit's xfail quirk


def junit_address(node_id: str) -> tuple[str, str]:
    """pytest's node id as its junit file names it (``mangle_test_address``): "tests/test_a.py::TestX::test_y[1]"
    → ("tests.test_a.TestX", "test_y[1]"); a module's collection error → ("", "tests.test_a")."""
    path, bracket, params = node_id.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]
