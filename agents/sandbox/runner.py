"""Run a generated project's tests in a scratch copy, under the isolation of ``isolation.py``.

Output goes to a file in a separate root-only directory, never a pipe: a grandchild that
keeps the descriptor open cannot make us block reading it, and the file is bounded by
RLIMIT_FSIZE. The one pipe, the tests' outcomes (stream.py), is read with a deadline and a
bound. We wait for the wrapper without reaping it (``waitid(WNOWAIT)``) so its
process-group id cannot be recycled before we kill the group.
"""
from __future__ import annotations

import importlib.util
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import agents.sandbox.isolation as isolation
import agents.sandbox.slots as slots
from agents.sandbox.canary import Canary, judged, plant, project_outcomes, scrubbed
from agents.sandbox.expected import expected_tests
from agents.sandbox.isolation import SandboxLimits
from agents.sandbox.report import JunitOutcome, TestReport, outcome_of, read_cases, read_untrusted
from agents.sandbox.stream import OutcomePipe, Streamed, parse, too_large

REPORT_NAME = ".report.xml"
_TRASH = "trash"  # finished runs' scratch copies, until empty_trash
_COVERAGE_JSON = ".coverage.json"
# Never copied: history and caches are not the project, and a stale report would read as this run's results.
_NOT_COPIED = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", REPORT_NAME, ".coverage", _COVERAGE_JSON)
DEFAULT_LIMITS = SandboxLimits()
# -P: the scratch dir (the cwd) stays off sys.path, so a project module cannot stand in for the runner or for a
# module it imports (json, say, to forge coverage's report); -s: nor can a project's .local/lib/pythonX.Y/site-packages
# (HOME is the scratch dir), which a system interpreter would search before its own site-packages.
PYTHON_FLAGS = ("-P", "-s")


@dataclass(frozen=True)
class _Run:
    exit_code: int
    timed_out: bool
    duration_s: float
    output_tail: str
    isolation: str
    streamed: bytes = b""  # what the run's outcome plugin wrote to the worker's pipe (stream.py)
    overflowed: bool = False
    unjudged: str = ""  # why its outcomes cannot be judged, though nothing says they were forged
    not_started: bool = False  # the outcome stream never saw pytest's session start


def run_tests(source_dir: Path, *, limits: SandboxLimits = DEFAULT_LIMITS, command: list[str] | None = None) -> TestReport:
    """Copy source_dir to a fresh scratch dir, run its tests there (pytest unless command is given), report.

    A custom command runs with cwd = the scratch dir and is scored from ``.report.xml`` there, if it writes one.
    The default one also runs the runner's canaries and its outcome plugin: outcomes are taken from what the plugin
    streamed as each test ended, which must agree with the junit file, show the canaries as planted and account
    for every test the project's files define (canary.py); otherwise the report is ``tampered`` and not ok.
    """
    return _run(Path(source_dir), limits, command, None)[0]


@dataclass(frozen=True)
class RepoTests:
    """An existing repository's own tests: pytest from its prepared venv (agents/environments), under the
    repository's own pytest configuration, with the runner's canaries collected beside them."""

    venv: Path  # bound read-only; its python runs pytest, its bin/ leads PATH, its pytest plugins load
    args: tuple[str, ...] = ()  # the repository's pytest options (agents/environments/testcmd.py)
    paths: tuple[str, ...] = (".",)  # what pytest collects, relative to the root
    pythonpath: tuple[str, ...] = (".",)  # importable roots, relative: the checkout's code, not an installed copy
    expected: tuple[str, ...] = ()  # test ids the report must mention (a ticket's reproduction tests)
    configured: bool = True  # it has a pytest configuration file (or its options name one)


@dataclass(frozen=True)
class RepoRun:
    report: TestReport
    outcomes: dict[str, str]  # every reported test id -> "passed", "failed", "errors" or "skipped"; canaries out


def run_repository_tests(source_dir: Path, tests: RepoTests, *, limits: SandboxLimits = DEFAULT_LIMITS) -> RepoRun:
    """run_tests for a repository's own tests, with every test's outcome (the report keeps only capped lists)."""
    report, outcomes = _run(Path(source_dir), limits, None, tests)
    return RepoRun(report, outcomes)


def _run(source_dir: Path, limits: SandboxLimits, command: list[str] | None,
         repo: RepoTests | None) -> tuple[TestReport, dict[str, str]]:
    root = sandbox_root()
    empty_trash(this_process_only=True)  # a worker empties it after each task (lifecycle.runner); other callers
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=root))
    # read before the code under test runs; a repository's configuration decides what it collects, so only the
    # tests its caller names are required there (the baseline's comparison finds any other that went missing)
    expected = [] if command is not None else list(repo.expected) if repo else expected_tests(source_dir)
    read_only = [repo.venv] if repo else []
    try:
        # a uid of the run's own (slots.py): its process limit is not shared with concurrent runs
        with slots.run_slot(root, wait_s=limits.timeout_s) as uid:
            _populate(scratch, source_dir, uid, read_only)
            canary = plant(scratch) if command is None else None
            measure = command is None and repo is None and importlib.util.find_spec("coverage") is not None
            argv = command or (repository_command(scratch, repo, canary) if repo
                               else default_command(scratch, coverage=measure, canary=canary))
            run = _execute(argv, scratch, limits, uid, venv=repo.venv if repo else None,
                           plugin_dir=scratch / canary.directory if canary else None)
            run, outcome, tampered, outcomes = _judged(run, scratch, canary, expected)
            percent = _coverage(scratch, limits, uid) if measure and not run.timed_out else None
        return _report(run, outcome, percent, tampered), outcomes
    except slots.NoFreeSlot as exc:
        raise isolation.SandboxUnavailable(str(exc)) from exc
    finally:
        _discard(scratch, root)


def _discard(scratch: Path, root: Path) -> None:
    """Out of every run's reach at once (moved into a root-only directory), removed by empty_trash: removing a
    test run's files takes tens of milliseconds that the step need not wait for."""
    trash = root / _TRASH
    trash.mkdir(mode=0o700, exist_ok=True)
    try:
        os.rename(scratch, trash / f"{os.getpid()}-{scratch.name}")
    except OSError:
        shutil.rmtree(scratch, ignore_errors=True)


def empty_trash(*, this_process_only: bool = False) -> None:
    """Remove the scratch copies of finished runs (this process's only: not another run's copy on this run's time);
    root removes whatever modes a run left. Nothing to do, and nothing created, where no run has ended."""
    if not _root_path().is_dir():
        return
    trash = sandbox_root() / _TRASH  # checked as ours first
    if trash.is_dir():
        for entry in os.scandir(trash):
            if not this_process_only or entry.name.startswith(f"{os.getpid()}-"):
                shutil.rmtree(entry.path, ignore_errors=True)


def repository_command(scratch: Path, tests: RepoTests, canary: Canary | None) -> list[str]:
    """pytest of the venv, with the repository's configuration (its tests need its settings and plugins) and
    options, and these pinned after them: the report's path, no cache, the root, the importable roots and the
    outcome plugin (-p, as in default_command). The canary file is named on the command line: pytest collects a
    named file whatever its python_files says. A repository without a configuration file gets an empty one (-c, and
    --confcutdir as in default_command): pytest 7 resolves -o pythonpath against the file's directory and stops
    before its session without one."""
    importable = " ".join(str(scratch / path) for path in tests.pythonpath)
    planted = [f"{canary.directory}/{canary.module}.py"] if canary else []
    plugin = ["-p", canary.plugin] if canary else []
    config = [] if tests.configured else ["-c", os.devnull, f"--confcutdir={scratch}"]
    return [str(tests.venv / "bin" / "python"), *PYTHON_FLAGS, "-m", "pytest", *tests.args, *config,
            f"--rootdir={scratch}", "-o", f"pythonpath={importable}", "-p", "no:cacheprovider",
            f"--junitxml={scratch / REPORT_NAME}", *plugin, "--", *tests.paths, *planted]


def default_command(scratch: Path, *, coverage: bool = False, canary: Canary | None = None) -> list[str]:
    """pytest (under coverage) with no configuration but this: a project's pytest.ini, tox.ini, setup.cfg or
    pyproject.toml cannot drop tests (--ignore, -k, testpaths) or load plugins (addopts = -p …), nor its
    coverage settings omit code. The project's code is importable from its root, and from src/ when that is a
    src layout (no src/__init__.py: a package named src stays a package, and its modules do not shadow the
    standard library's); PYTHON_FLAGS keep the project directory and its user site-packages off sys.path
    until pytest is running, so a project module cannot stand in for pytest itself. Called once the scratch
    copy is populated (and the canaries planted: they are collected with the project's tests, not measured, and
    the outcome plugin beside them is loaded with -p)."""
    omit = [f"--omit={scratch / canary.directory}/*"] if canary else []
    plugin = ["-p", canary.plugin] if canary else []
    runner = ["-m", "coverage", "run", f"--rcfile={os.devnull}", "--source=.", *omit, "-m", "pytest"] if coverage \
        else ["-m", "pytest"]
    # --confcutdir: with -c, pytest looks for conftest.py files up to the config file's directory (/dev), and
    # the scratch dir's parent is not listable by the sandbox uid; pythonpath: absolute, since relative paths
    # would be read from that directory too
    src = scratch / "src"
    importable = [scratch, src] if src.is_dir() and not (src / "__init__.py").exists() else [scratch]
    return [sys.executable, *PYTHON_FLAGS, *runner, "-c", os.devnull, f"--rootdir={scratch}", f"--confcutdir={scratch}",
            "-o", f"pythonpath={' '.join(map(str, importable))}", "-q", "-p", "no:cacheprovider",
            f"--junitxml={scratch / REPORT_NAME}", *plugin]


def sandbox_root() -> Path:
    """Not under /tmp: the run gets a private tmpfs there, which would hide its scratch dir.

    Root-owned 0o711: the sandbox uid can reach its own scratch dir but not list or write the others.
    """
    root = _root_path()
    root.mkdir(mode=0o711, exist_ok=True)
    info = root.lstat()
    if info.st_uid != os.geteuid() or info.st_mode & 0o022 or root.is_symlink():
        raise RuntimeError(f"{root} is not ours or is writable by others; refusing to run untrusted code there")
    if info.st_mode & 0o777 != 0o711:
        root.chmod(0o711)  # mkdir's mode is filtered by the worker's umask (0o077 would lock the sandbox uid out)
    return root


def _root_path() -> Path:
    return Path("/var/tmp") / f"aiteam-sandbox-{os.geteuid()}"


def _populate(scratch: Path, source_dir: Path, uid: int, read_only: list[Path]) -> None:
    # symlinks=True: following a link as root would copy files the sandbox uid may not read.
    shutil.copytree(source_dir, scratch, symlinks=True, dirs_exist_ok=True, ignore=_NOT_COPIED)
    (scratch / "tmp").mkdir(exist_ok=True)
    owner = isolation.runs_as(uid, scratch, read_only)
    if owner != os.geteuid():  # without the drop, root without capabilities could not write a tree it gave away
        _chown_tree(scratch, owner)


def _chown_tree(top: Path, uid: int) -> None:
    os.chown(top, uid, uid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)


def _execute(command: list[str], scratch: Path, limits: SandboxLimits, uid: int, *, venv: Path | None = None,
             plugin_dir: Path | None = None) -> _Run:
    """venv: a repository's, bound read-only (RepoTests). plugin_dir: where outcome_plugin.py's copy is (importable
    through PYTHONPATH: -p imports it before pytest's pythonpath setting applies); the run then gets the write end
    of an outcome pipe."""
    wrapped = isolation.wrap(command, scratch=scratch, limits=limits, uid=uid, read_only=[venv] if venv else [])
    marker = secrets.token_hex(8)
    outdir = Path(tempfile.mkdtemp(prefix="out-", dir=sandbox_root()))
    pipe = OutcomePipe() if plugin_dir else None
    try:
        log_path = outdir / "output.log"
        env = _environment(scratch, marker, venv)
        if pipe and plugin_dir:
            env |= {"PYTHONPATH": str(plugin_dir), **pipe.environment()}
        with open(log_path, "wb") as out:
            started = time.monotonic()
            # preexec_fn is unsafe in threaded parents; sandbox workers are prefork, one task per process (and the
            # pipe's reader thread starts after the fork).
            proc = subprocess.Popen(
                wrapped.argv, cwd=scratch, env=env, pass_fds=(pipe.write_fd,) if pipe else (),
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=isolation.rlimit_setter(limits),
            )
            if pipe:
                pipe.reading()
            try:
                timed_out = not _wait_unreaped(proc.pid, limits.timeout_s)
            finally:  # also when the worker itself is interrupted (e.g. a Celery soft time limit)
                _kill_group(proc.pid)  # timeout: everything; normal exit: stragglers left in the group
                proc.wait()
                _kill_marked(marker)
            duration = time.monotonic() - started
        tail = output_tail(log_path, limits.max_output_chars)
        streamed = pipe.collected() if pipe else b""
        return _Run(proc.returncode, timed_out, round(duration, 3), tail, wrapped.description, streamed,
                    bool(pipe and pipe.overflowed))
    finally:
        if pipe:
            pipe.close()
        shutil.rmtree(outdir, ignore_errors=True)


def _environment(scratch: Path, marker: str, venv: Path | None) -> dict[str, str]:
    env = isolation.environment(scratch, marker)
    if venv is not None:
        # The repository's venv replaces the worker's on PATH (a test that runs `python` gets the repository's),
        # and its pytest plugins are the repository's own (pytest-django, say), which its tests rely on.
        env["PATH"] = ":".join([str(venv / "bin"), *env["PATH"].split(":")[1:]])
        env["VIRTUAL_ENV"] = str(venv)
        del env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
    return env


def _wait_unreaped(pid: int, timeout_s: float) -> bool:
    """True if pid exited within timeout_s. The zombie keeps its pid and process group reserved until proc.wait().
    A pidfd wakes us as it exits (polling would notice tens of milliseconds later)."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # a kernel without pidfds (before Linux 5.3)
        return _poll_unreaped(pid, timeout_s)
    try:
        waiting = select.poll()
        waiting.register(pidfd, select.POLLIN)
        return bool(waiting.poll(timeout_s * 1000))  # readable once it exits; it is not reaped
    finally:
        os.close(pidfd)


def _poll_unreaped(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
        pause = min(pause * 2, 0.05)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_marked(marker: str, patience_s: float = 2.0) -> None:
    """Kill processes whose environment carries this run's marker until none is left.

    Needed only without a PID namespace (there the kernel already killed them all), where a daemonized
    grandchild leaves the process group. Best effort: a process that replaced its environment is missed.
    """
    needle = f"{isolation.RUN_MARKER}={marker}".encode()
    deadline = time.monotonic() + patience_s
    while _signal_marked(needle) and time.monotonic() < deadline:
        time.sleep(0.02)


def _signal_marked(needle: bytes) -> bool:
    found = False
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                if needle in handle.read().split(b"\0"):
                    os.kill(int(entry.name), signal.SIGKILL)
                    found = True
        except (OSError, ValueError):
            continue  # exited meanwhile, or not ours to read
    return found


def output_tail(path: Path, max_chars: int) -> str:
    size = path.stat().st_size
    with open(path, "rb") as handle:
        handle.seek(max(0, size - 4 * max_chars))  # 4 bytes per char at most in UTF-8
        text = handle.read().decode("utf-8", errors="replace")
    if len(text) <= max_chars and size <= 4 * max_chars:
        return text
    marker = f"[... output truncated: {size} bytes in all, the end follows ...]\n"
    return marker + text[-max(max_chars - len(marker), 0):]


def _coverage(scratch: Path, limits: SandboxLimits, uid: int) -> float | None:
    """coverage's own JSON report, produced by a second sandboxed run (the data file is untrusted input)."""
    command = [sys.executable, *PYTHON_FLAGS, "-m", "coverage", "json", f"--rcfile={os.devnull}", "-q", "-o",
               _COVERAGE_JSON]
    _execute(command, scratch, limits, uid)
    data = read_untrusted(scratch / _COVERAGE_JSON)
    try:
        return round(float(json.loads(data or b"")["totals"]["percent_covered"]), 2)
    except (ValueError, KeyError, TypeError):
        return None


def _judged(run: _Run, scratch: Path, canary: Canary | None,
            expected: list[str]) -> tuple[_Run, JunitOutcome | None, list[str], dict[str, str]]:
    """The run, its project's outcome, why it cannot be believed, and every project test's outcome (pytest's node
    id → kind). A custom command's junit file, if it wrote one, is all there is (and no per-test outcomes are
    kept). A default or repository run is read from its outcome stream and its exit code derived from it: the
    process's own is 1 for the failing canary, and code under test can set it (os._exit) after its tests failed.
    A tampered run's output is left as it was, for whoever looks; otherwise the canaries are scrubbed from it."""
    cases = read_cases(scratch / REPORT_NAME)
    if canary is None:
        return run, (None if cases is None else outcome_of(cases, scratch)), [], {}
    streamed = parse(run.streamed, overflowed=run.overflowed)
    killed = run.timed_out or _signal_number(run.exit_code) > 0
    # pytest's INTERNALERROR (exit 3, a MemoryError say) or a usage error it finds once the session started (exit 4,
    # a path that does not exist) ends the session where it was: the junit file and the canaries are cut short as
    # in a killed run, which is not ok either way (its exit code says why), not a forgery
    internal = streamed.finished and streamed.exitstatus in (3, 4)
    outcome, tampered = judged(replace(streamed, finished=False) if internal else streamed, cases, canary, expected,
                               ended_by_itself=not (killed or internal))
    if not streamed.finished:  # pytest never ended its session: a non-zero exit must not read as "nothing failed"
        outcome = replace(outcome, errors=max(outcome.errors, int(run.exit_code != 0 and not run.timed_out)))
    run = replace(run, exit_code=_streamed_exit_code(run, outcome, streamed, killed), unjudged=too_large(streamed),
                  not_started=not (streamed.started or killed))
    outcomes = project_outcomes(canary, streamed)
    return (run if tampered else replace(run, output_tail=scrubbed(run.output_tail, canary, streamed))), outcome, tampered, \
        outcomes


def _streamed_exit_code(run: _Run, outcome: JunitOutcome, streamed: Streamed, killed: bool) -> int:
    if killed or not streamed.finished:
        return run.exit_code  # all there is (a cut stream is tampered, or the run died)
    if streamed.exitstatus in (2, 3, 4):  # pytest's interrupted, internal error, usage error: more than "failed"
        return streamed.exitstatus
    return 1 if outcome.failed or outcome.errors else 0


def _report(run: _Run, outcome: JunitOutcome | None, coverage_percent: float | None, tampered: list[str]) -> TestReport:
    if outcome is None:
        # No junit: the run died before pytest finished. A non-zero exit must not read as "nothing failed".
        outcome = JunitOutcome(0, 0, int(run.exit_code != 0 and not run.timed_out), 0, [], [])
    return TestReport(
        passed=outcome.passed, failed=outcome.failed, errors=outcome.errors, skipped=outcome.skipped,
        failing_tests=outcome.failing_tests, tests_run=outcome.tests_run, duration_s=run.duration_s,
        coverage_percent=coverage_percent,
        exit_code=run.exit_code, timed_out=run.timed_out, killed_reason=_killed_reason(run),
        output_tail=run.output_tail, isolation=run.isolation, tampered=tampered, unjudged=run.unjudged,
        not_started=run.not_started,
    )


def _killed_reason(run: _Run) -> str:
    if run.timed_out:
        return "timeout"
    signum = _signal_number(run.exit_code)
    reasons = {
        signal.SIGXCPU: "cpu",
        signal.SIGXFSZ: "file size",
        # RLIMIT_CPU's hard limit and the kernel's OOM killer are the only other senders of SIGKILL;
        # the hard limit follows SIGXCPU, which python does not catch, so SIGKILL means memory.
        signal.SIGKILL: "memory",
    }
    return reasons.get(signum, f"signal {signum}") if signum > 0 else ""


def _signal_number(exit_code: int) -> int:
    """The signal that killed the run, 0 if none. Negative: killed directly; 128+n: reported by the namespace's
    init. pytest itself exits 0-5."""
    return -exit_code if exit_code < 0 else exit_code - 128 if exit_code > 128 else 0
