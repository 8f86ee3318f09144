"""The runner's canaries taken out of the output the engineer and the reviewer read (``canary.scrubbed``).

Real runs through the sandbox are compared with pytest's own output for the project alone (the same command
without the canaries, outside the sandbox): they must read the same, save the run's duration and the percentages
of lines before the last (pytest counted the canaries in those). Cases a real run rarely shows are checked on
text: where the canaries' letters cannot be placed surely, the progress is left as pytest wrote it.
"""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agents.sandbox import SandboxLimits, isolation, run_tests
from agents.sandbox.canary import CANARY_DIR_PREFIX, Canary, scrubbed
from agents.sandbox.runner import RepoTests, default_command, repository_command, run_repository_tests
from agents.sandbox.stream import Streamed

pytestmark = pytest.mark.xdist_group("sandbox_uid")  # with the other sandbox modules: one run at a time
LIMITS = SandboxLimits(timeout_s=30, cpu_s=30, memory_bytes=1024**3, max_output_chars=20000)
WORKER_VENV = Path(sys.prefix)  # stands in for a repository's venv: its python runs pytest, its plugins load

MIXED = {
    "tests/test_books.py": """\
        import pytest


        def test_adds():
            assert 1 + 1 == 2


        def test_refuses_a_duplicate():
            assert [1, 1] == [1]


        @pytest.fixture
        def shelf():
            raise RuntimeError("the shelf fell")


        def test_lists(shelf):
            pass


        @pytest.mark.skip(reason="later")
        def test_exports():
            pass
        """,
    "tests/test_cli.py": """\
        import pytest


        @pytest.mark.xfail(reason="known")
        def test_help():
            assert False


        def test_version():
            print("aiteam-readinglist 0.1")
        """,
    "test_top.py": "def test_top():\n    assert True\n",
}


@pytest.fixture(autouse=True)
def _unisolated_runs_allowed(settings):
    settings.AITEAM_SANDBOX_ALLOW_UNISOLATED = True  # a non-root machine still runs them (isolation is not the point)


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def _passing(count: int) -> dict[str, str]:
    """count passing tests in two files."""
    half = count // 2
    return {"tests/test_a.py": "".join(f"def test_a{i}():\n    pass\n\n\n" for i in range(half)),
            "tests/test_b.py": "".join(f"def test_b{i}():\n    pass\n\n\n" for i in range(count - half))}


def _alone(root: Path, argv: list[str], *, autoload: bool) -> str:
    """pytest's output for the project without the canaries: the runner's own command, outside the sandbox."""
    (root / "tmp").mkdir(exist_ok=True)
    env = isolation.environment(root, "alone")
    if autoload:
        del env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
    done = subprocess.run(argv, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=60)
    (root / ".report.xml").unlink(missing_ok=True)
    return done.stdout


def _comparable(text: str, root: Path) -> str:
    text = text.replace(str(root), "ROOT")
    text = re.sub(r"/var/tmp/aiteam-sandbox-\d+/run-[\w-]+", "ROOT", text)
    text = re.sub(r" in \d+\.\d+s", " in Ts", text)
    text = re.sub(r" \[(?!100%)[ \d]{2}\d%\]$", " [ N%]", text, flags=re.M)  # counted with the canaries
    return re.sub(r"^([=-])+ (.+?) [=-]+$", r"\1 \2 \1", text, flags=re.M)  # centred in a width its words change


def _same_as_alone(scrubbed_tail: str, alone: str, root: Path) -> None:
    assert CANARY_DIR_PREFIX not in scrubbed_tail
    assert _comparable(scrubbed_tail, root) == _comparable(alone, root)
    framed = [line for line in scrubbed_tail.splitlines() if re.match(r"^=+ .+ =+$", line)]
    assert all(len(line) == 80 for line in framed), framed  # re-centred as pytest centres them


@pytest.mark.parametrize("files, figures", [
    (MIXED, (3, 1, 1, 2)),
    (_passing(5), (5, 0, 0, 0)),
    (_passing(70), (70, 0, 0, 0)),  # the canaries end the first line of progress
    (_passing(71), (71, 0, 0, 0)),  # the passing canary ends it, the failing one wraps alone to the next
    (_passing(72), (72, 0, 0, 0)),  # the project's last test ends it: both canaries wrap to the next
    (_passing(150), (150, 0, 0, 0)),
], ids=["a failure, an error, a skip beside the canaries", "all pass", "70", "71", "72", "150"])
def test_a_default_run_reads_as_pytest_on_the_project_alone(tmp_path, files, figures):
    root = _project(tmp_path / "project", files)
    report = run_tests(root, limits=LIMITS)
    assert (report.passed, report.failed, report.errors, report.skipped) == figures and report.tampered == []
    _same_as_alone(report.output_tail, _alone(root, default_command(root), autoload=False), root)


@pytest.mark.parametrize("files, args", [  # each verbosity once, with a summary and a traceback style beside it
    (MIXED, ()), (MIXED, ("-v", "-rA")), (MIXED, ("-q", "--tb=short", "-rfEs")), (MIXED, ("-vv", "--tb=line")),
    (_passing(3), ()),
], ids=["no options", "-v -rA", "-q --tb=short -rfEs", "-vv --tb=line", "all pass"])
def test_a_repository_run_reads_as_pytest_on_the_project_alone_in_its_style(tmp_path, files, args):
    """A repository's options decide the style (not -q: a line per file, a junit line after the failures)."""
    root = _project(tmp_path / "repository", files)
    tests = RepoTests(venv=WORKER_VENV, args=args)
    run = run_repository_tests(root, tests, limits=LIMITS)
    assert (run.report.failed, run.report.errors, run.report.tampered) == ((1, 1, []) if files is MIXED else (0, 0, []))
    _same_as_alone(run.report.output_tail, _alone(root, repository_command(root, tests, None), autoload=True), root)


def test_canaries_a_plugin_moved_first_still_run_last_and_leave_the_progress(tmp_path):
    """A repository's plugin (pytest-randomly, say) may reorder the tests: the runner's outcome plugin moves the
    canaries back after every other test."""
    files = {**MIXED, "conftest.py": "def pytest_collection_modifyitems(items):\n    items.reverse()\n"}
    root = _project(tmp_path / "project", files)
    report = run_tests(root, limits=LIMITS)
    assert report.tampered == [] and report.output_tail.startswith(".xsEF.. ")  # the project's, reversed
    _same_as_alone(report.output_tail, _alone(root, default_command(root), autoload=False), root)


@pytest.mark.parametrize("args", [("-m", "unit"), ("-k", "fast")])
def test_a_repository_selecting_its_tests_by_marker_or_name_still_runs_the_canaries(tmp_path, args):
    """-m and -k select among the repository's own tests: the canaries, deselected with the rest, run all the same,
    so an honest repository is not read as forged."""
    root = _project(tmp_path / "repository", {
        "pytest.ini": "[pytest]\nmarkers =\n    unit: fast ones\n",
        "tests/test_a.py": "import pytest\n\n\n@pytest.mark.unit\ndef test_fast():\n    pass\n\n\n"
                           "def test_slow():\n    assert False\n"})
    run = run_repository_tests(root, RepoTests(venv=WORKER_VENV, args=args), limits=LIMITS)
    assert run.report.tampered == [] and run.report.ok
    assert run.outcomes == {"tests/test_a.py::test_fast": "passed"}


# On text: what a real run rarely shows.

CANARY = Canary("~aiteam-0a1b2c", "test_0c", "test_1d", "test_2e", "f00d" * 8, "aiteam_outcomes_3f")
PASSING, FAILING = CANARY.node_id(CANARY.must_pass), CANARY.node_id(CANARY.must_fail)
CANARY_FAILURE = f"""\
_________________________________ test_2e __________________________________

    def test_2e():
>       raise AssertionError("{CANARY.nonce}")
E       AssertionError: {CANARY.nonce}

~aiteam-0a1b2c/test_0c.py:9: AssertionError"""
CANARY_SUMMARY = f"FAILED {FAILING} - AssertionError: {CANARY.nonce}"


def _streamed(*tests: tuple[str, str]) -> Streamed:
    """The stream of tests run in this order, each with its outcome."""
    streamed = Streamed(started=True, finished=True, exitstatus=1)
    for test, outcome in tests:
        streamed.reports += [(test, "setup"), (test, "call"), (test, "teardown")]
        streamed.outcomes[test] = outcome
    return streamed


def _output(progress: str, summary: str) -> str:
    return "\n".join([progress, "=" * 35 + " FAILURES " + "=" * 35, CANARY_FAILURE,
                      "=" * 27 + " short test summary info " + "=" * 28, CANARY_SUMMARY, summary]) + "\n"


def test_canaries_that_did_not_run_last_leave_the_progress_as_it_was():
    streamed = _streamed(("tests/test_a.py::test_x", "passed"), (PASSING, "passed"), (FAILING, "failed"),
                         ("tests/test_a.py::test_y", "passed"))
    progress = ".F.." + " " * 68 + " [100%]"
    assert scrubbed(_output(progress, "1 failed, 3 passed in 0.01s"), CANARY, streamed) == \
        f"{progress}\n2 passed in 0.01s\n"  # their entries, sections and counts go all the same


def test_letters_that_are_not_the_canaries_leave_the_progress_as_it_was():
    streamed = _streamed(("tests/test_a.py::test_x", "passed"), (PASSING, "passed"), (FAILING, "failed"))
    progress = "..Fprinted" + " " * 62 + " [100%]"  # something else wrote after them
    assert scrubbed(_output(progress, "1 failed, 2 passed in 0.01s"), CANARY, streamed) == \
        f"{progress}\n1 passed in 0.01s\n"


def test_a_run_of_the_canaries_alone_shows_no_tests():
    streamed = _streamed((PASSING, "passed"), (FAILING, "failed"))
    assert scrubbed(_output(".F" + " " * 70 + " [100%]", "1 failed, 1 passed in 0.01s"), CANARY, streamed) == \
        "no tests ran in 0.01s\n"


def test_an_entry_with_nothing_after_it_is_left_to_the_line_filter():
    streamed = _streamed(("tests/test_a.py::test_x", "passed"), (PASSING, "passed"), (FAILING, "failed"))
    cut = "=" * 35 + " FAILURES " + "=" * 35 + "\n" + CANARY_FAILURE + "\nprinted at exit\n"
    assert scrubbed(cut, CANARY, streamed) == "=" * 35 + " FAILURES " + "=" * 35 + "\n\n\nprinted at exit\n"


def test_counts_are_left_when_the_canaries_are_not_reported_as_planted():
    """A run that ended before the canaries (a timeout, a collection error): nothing of theirs to count out."""
    streamed = _streamed(("tests/test_a.py::test_x", "failed"), ("tests/test_a.py::test_y", "passed"))
    text = "collected 2 items\n\n===== 1 failed, 1 passed in 0.01s =====\n"
    assert scrubbed(text, CANARY, streamed) == text


@pytest.mark.parametrize("collected, left", [
    ("collected 3 items", "collected 1 item"),
    ("collecting ... collected 9 items / 1 error / 2 deselected / 7 selected",
     "collecting ... collected 7 items / 1 error / 2 deselected / 5 selected"),
])
def test_the_collected_count_leaves_the_canaries_out(collected, left):
    streamed = _streamed(("tests/test_a.py::test_x", "passed"), (PASSING, "passed"), (FAILING, "failed"))
    assert scrubbed(f"{collected}\n", CANARY, streamed) == f"{left}\n"
