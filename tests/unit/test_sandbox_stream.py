"""The outcome stream on its own: a real child process writes into the worker's pipe, and the lines it holds are
read as the runner's plugin writes them. Whole sandbox runs that forge results are in test_sandbox_tamper.py."""
from __future__ import annotations

import json
import subprocess
import sys
import time

from agents.sandbox import stream
from agents.sandbox.stream import OutcomePipe, junit_address, parse


def _written_by_a_child(code: str) -> OutcomePipe:
    pipe = OutcomePipe()
    try:
        proc = subprocess.Popen([sys.executable, "-c", code.replace("FD", str(pipe.write_fd))],
                                pass_fds=(pipe.write_fd,))
        pipe.reading()
        assert proc.wait(timeout=20) == 0  # it never blocked on a full pipe
    except BaseException:
        pipe.close()
        raise
    return pipe


def _lines(*lines: dict) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def test_the_writer_never_blocks_and_everything_up_to_the_bound_is_kept(monkeypatch):
    pipe = _written_by_a_child("import os\nfor _ in range(16): os.write(FD, b'x' * 65536)")  # 1 MiB: 16 pipe buffers
    try:
        assert len(pipe.collected()) == 16 * 65536 and not pipe.overflowed
    finally:
        pipe.close()
    monkeypatch.setattr(stream, "MAX_STREAM_BYTES", 100_000)
    pipe = _written_by_a_child("import os\nfor _ in range(16): os.write(FD, b'x' * 65536)")
    try:
        assert len(pipe.collected()) == 100_000 and pipe.overflowed
    finally:
        pipe.close()
    streamed = parse(_lines({"event": "start"}, {"id": "tests/test_a.py::test_x", "when": "call", "outcome": "passed"}),
                     overflowed=True)
    assert streamed.forged == []  # too large is not forged: the report says so apart (runner's unjudged)
    assert stream.too_large(streamed) == ("the outcome stream passed its bound of 0.1 MiB after 1 test(s) had reported: "
                                          "the suite is too large to be judged in one run")
    assert stream.too_large(parse(b"")) == ""


def test_a_straggler_holding_the_pipe_open_does_not_hold_the_worker():
    pipe = OutcomePipe()
    straggler = subprocess.Popen(["sleep", "30"], pass_fds=(pipe.write_fd,))
    try:
        pipe.reading()
        started = time.monotonic()
        assert pipe.collected() == b""
        assert time.monotonic() - started < stream._DRAIN_S + 1
    finally:
        straggler.kill()
        straggler.wait()
        pipe.close()


def test_repeated_lines_that_agree_are_not_forgery_and_a_cut_last_line_is_dropped():
    test = "tests/test_a.py::test_x"
    data = _lines({"event": "start"}, {"id": test, "when": "call", "outcome": "failed", "message": "E boom"},
                  {"id": test, "when": "call", "outcome": "failed", "message": "E boom"},
                  {"event": "finish", "exitstatus": 1}) + b'{"id": "tests/test_a.py::test_y", "wh'
    streamed = parse(data)
    assert streamed.forged == [] and streamed.finished and streamed.exitstatus == 1
    assert streamed.outcomes == {test: "failed"} and streamed.messages == {test: "E boom"}


def test_lines_the_plugin_never_writes_are_forgery():
    test = "tests/test_a.py::test_x"
    data = _lines({"event": "start"}, {"id": test, "when": "call", "outcome": "passed"},
                  {"id": test, "when": "call", "outcome": "failed"}, {"event": "finish", "exitstatus": 0},
                  {"event": "finish", "exitstatus": 1}) + b"not json\n"
    streamed = parse(data)
    assert streamed.outcomes == {test: "failed"}  # of two conflicting outcomes, the worse counts
    assert streamed.forged == [
        f"line 3 of the outcome stream reports {test} (call) failed after passed: a second, conflicting outcome",
        "line 5 of the outcome stream ends the session with status 1 after 0",
        "line 6 of the outcome stream is not what the runner's plugin writes"]


def test_a_teardown_error_outranks_the_call_and_ids_map_to_junit_names():
    test = "tests/test_a.py::TestX::test_y[a::b-1]"
    streamed = parse(_lines({"id": test, "when": "call", "outcome": "failed"},
                            {"id": test, "when": "teardown", "outcome": "failed"}))
    assert streamed.outcomes == {test: "errors"} and not streamed.finished
    assert streamed.reports == [(test, "call"), (test, "teardown")]  # every line, in order: canary.scrubbed's
    assert junit_address(test) == ("tests.test_a.TestX", "test_y[a::b-1]")
    assert junit_address("tests/test_a.py") == ("", "tests.test_a")  # a module that failed to import


def test_a_failed_subtest_fails_its_test_and_passed_ones_do_not_conflict_with_it():
    # pytest 9's unittest subTest: the subtests' reports carry their test's id and "call", then the test's own
    parts, fine = "tests/test_sub.py::T::test_parts", "tests/test_sub.py::T::test_fine"
    data = _lines({"event": "start"}, {"id": parts, "when": "setup", "outcome": "passed"},
                  {"id": parts, "when": "call", "outcome": "passed", "sub": True},
                  {"id": parts, "when": "call", "outcome": "failed", "sub": True, "message": "AssertionError: 1 == 1"},
                  {"id": parts, "when": "call", "outcome": "skipped", "sub": True},
                  {"id": parts, "when": "call", "outcome": "passed"},
                  {"id": fine, "when": "call", "outcome": "passed", "sub": True},
                  {"id": fine, "when": "call", "outcome": "skipped", "sub": True},
                  {"id": fine, "when": "call", "outcome": "passed"},
                  {"event": "finish", "exitstatus": 1})
    streamed = parse(data)
    assert streamed.forged == []
    assert streamed.outcomes == {parts: "failed", fine: "passed"}
    assert streamed.messages == {parts: "AssertionError: 1 == 1"}
    assert streamed.reports == [(parts, "setup"), (parts, "call"), (fine, "call")]  # the tests' own reports
    forged = parse(data + _lines({"id": fine, "when": "call", "outcome": "failed"}))  # its own call, a second time
    assert forged.forged == [f"line 11 of the outcome stream reports {fine} (call) failed after passed: a second, "
                             "conflicting outcome"]
