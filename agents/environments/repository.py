"""An existing repository's preparation and its judged runs, as the lifecycle's steps use them (docs/adr/0035).

    prepared = prepare_repository(checkout, configured=..., cache_dir=..., sources=..., limits=...)   # repo_prepare
    environment = recorded_environment(prepared, cache_dir=..., sources=..., base_tree=...)         # later steps
    after = judged_run(checkout, prepared, environment, limits=..., extra_paths=qc_files)
    report = judged_report(after, prepared, reproductions=..., at_base=run of base + QC's files)

`prepared` is plain data (what the BASELINE artifact stores): the test command, the environment's key, both base
runs' outcomes, the flaky tests. A judged report is the sandbox report's dict (the keys the self-test and the
gate read) whose `ok` and `failing_tests` are the comparison's, not the raw run's: a test that already failed
twice at the base commit is not the change's to fix, and a flaky one judges nothing.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from agents.environments.baseline import FAILED, Baseline, compare, counts
from agents.environments.prepare import Environment, PackageSources, installed_version, prepare_environment, ready_environment
from agents.environments.run import BaselineRuns, run_baseline, run_repository
from agents.environments.testcmd import GIVEN, TestCommand, detect_test_command
from agents.sandbox.isolation import SandboxLimits
from agents.sandbox.report import MAX_TEST_IDS
from agents.sandbox.runner import RepoRun

_REPORT_KEYS = ("passed", "failed", "errors", "skipped", "duration_s", "exit_code", "timed_out", "killed_reason",
                "isolation", "tampered", "unjudged", "output_tail")


class BaselineUnusable(ValueError):
    """The base commit's own tests cannot judge a change (their run did not run them, or forged its report); a
    person looks. `log_tail`: the run's output, for them."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


# pytest's exit codes other than 0 (all passed) and 1 (some failed): the tests were not all run and judged
_EXIT_CODES = {
    2: "pytest was interrupted (exit 2)",
    3: "pytest stopped with an internal error (exit 3)",
    4: "pytest refused its command line or configuration (exit 4, a usage error)",
    5: "pytest collected no test (exit 5)",
}
_WHAT_TO_DO = {
    4: "set the project's test_command setting, or [tests] command in the repository's .aiteam.toml, to a command "
       "that runs here, or add the plugin whose options pytest does not know to the repository's test "
       "dependencies (a requirements file, a test/tests/testing/dev extra, or tox.ini's [testenv] deps)",
    5: "check the test command's paths and the pytest configuration's testpaths, markers and python_files (or set "
       "the project's test_command setting, or [tests] command in .aiteam.toml)",
}
_TEST_DEPENDENCIES = "a requirements file, a test/tests/testing/dev extra, or tox.ini's [testenv] deps"
# the last import error in a run's output: what a conftest, a settings module or pytest's own plugins could not import
_IMPORT_ERROR = re.compile(r"^(?:E\s+|ERROR: )?((?:ModuleNotFoundError|ImportError): .+|Error importing plugin .+)$",
                           re.MULTILINE)
_OLDEST_PYTEST = 7  # its `pythonpath` setting is how the runner puts the checkout ahead of site-packages
_TOO_LARGE = ("Set the project's test_command setting, or [tests] command in the repository's .aiteam.toml, to a "
              "part of the suite (some of its test directories, or -m or -k) that covers the code tickets change")


def prepare_repository(root: Path, *, configured: str | None, cache_dir: Path, sources: Callable[[TestCommand], PackageSources],
                       limits: SandboxLimits) -> dict[str, Any]:
    """The test command, the environment (built or reused) and the two base runs of the checkout at root.
    NotPython, BadTestCommand, BadDependencies, InstallFailed and BaselineUnusable are for a person: a base run
    that forged its report, that did not run the tests (killed at a limit, pytest interrupted or refusing its
    command) or in which no test passed would judge nothing. So is one stopped at the sandbox's time limit: the
    repository's own suite outgrowing it is its size, not a hiccup a retry would cure."""
    command = detect_test_command(root, configured=configured)
    environment = prepare_environment(root, cache_dir=cache_dir, sources=sources(command),
                                      runner_packages=("pytest", *command.plugins))
    _ensure_pytest(environment)
    runs = run_baseline(root, command, environment, limits=limits)
    _ensure_usable(runs, command, limits)
    return {
        "test_command": asdict(command),
        "environment": {k: v for k, v in asdict(environment).items() if k != "venv"},
        "runs": [dict(outcomes) for outcomes in runs.outcomes],
        "baseline": runs.baseline.to_dict(),
        "flaky": list(runs.baseline.flaky),
        "counts": counts(runs.baseline.outcomes),
        "reports": [{k: report.to_dict()[k] for k in _REPORT_KEYS} for report in runs.reports],
    }


def _ensure_pytest(environment: Environment) -> None:
    version = installed_version(environment.venv, "pytest") or ""
    major = version.split(".", 1)[0]
    if major.isdigit() and int(major) < _OLDEST_PYTEST:
        raise BaselineUnusable(
            f"the repository's test dependencies install pytest {version}: aiteam runs the tests with pytest "
            f"{_OLDEST_PYTEST} or later, whose `pythonpath` setting makes the checkout's own code the one imported "
            f"(with an older pytest the tests would import an installed copy, or nothing). Allow pytest>="
            f"{_OLDEST_PYTEST} in the repository's test dependencies ({_TEST_DEPENDENCIES})")


def _ensure_usable(runs: BaselineRuns, command: TestCommand, limits: SandboxLimits) -> None:
    for number, report in enumerate(runs.reports, start=1):
        if report.timed_out:
            raise BaselineUnusable(_too_long(number, report.duration_s, limits), report.output_tail)
        if report.unjudged:
            raise BaselineUnusable(f"the base commit's test run ({number} of 2) cannot be judged: {report.unjudged}. "
                                   f"{_TOO_LARGE}", report.output_tail)
        if report.tampered:
            raise BaselineUnusable("the repository's own tests forged their report at the base commit, so no change "
                                   f"can be judged against them: {'; '.join(sorted(set(report.tampered)))}",
                                   report.output_tail)
        if problem := run_problem(report.to_dict(), limits=limits):
            raise BaselineUnusable(f"the base commit's test run ({number} of 2) did not run the repository's tests, "
                                   f"so no change can be judged against them: {problem}", report.output_tail)
    # No test at all: a repository with none yet (a project just started, a Django app's empty tests.py) keeps
    # an empty baseline, and QC's reproduction test is what judges the change; unless a person wrote the command
    # down for aiteam, which then names where the tests are.
    if not any(runs.outcomes) and command.source in GIVEN:  # the canaries ran, so pytest did not exit 5
        tail = runs.reports[0].output_tail
        advice = _missing_module(tail) or _WHAT_TO_DO[5]
        raise BaselineUnusable(f"the base commit's test run reported no test of the repository: {advice}", tail)
    tally = counts(runs.baseline.outcomes)
    if not runs.baseline.passing and tally["failed"] + tally["errors"]:  # all skipped (a database it lacks) is kept
        raise BaselineUnusable(
            f"no test passed in both base runs ({tally['passed']} passed, {tally['failed']} failed, {tally['errors']} "
            f"errors, {tally['skipped']} skipped in the first), so no change can be judged against them. A test "
            "dependency that is not installed shows as an import error in the output: list it in a requirements "
            "file, a test/tests/testing/dev extra or tox.ini's [testenv] deps; or set the project's test_command "
            "setting (or [tests] command in .aiteam.toml) to the command that runs the tests",
            runs.reports[0].output_tail)


def _too_long(number: int, duration_s: float, limits: SandboxLimits) -> str:
    return (f"the base commit's test run ({number} of 2) was stopped at the sandbox's time limit after {duration_s:g} s "
            f"(AITEAM_SANDBOX_TIMEOUT_S, now {limits.timeout_s:g} s): the repository's test suite takes longer than "
            "that here. Raise AITEAM_SANDBOX_TIMEOUT_S above the suite's run time, and AITEAM_STEP_SOFT_LIMIT_S with "
            "it: repository preparation runs the suite twice in one step, after installing its environment")


def run_problem(report: Mapping[str, Any], *, limits: SandboxLimits | None = None) -> str:
    """Why a run (a sandbox report's dict) did not really run the repository's tests, with the setting to raise or
    what to do; "" when it did: pytest ended with every test passed (0) or some failed (1)."""
    memory = f" (now {limits.memory_bytes // 1024**2} MB of address space per process)" if limits else ""
    raise_memory = f"raise AITEAM_SANDBOX_MEMORY_MB{memory} and run it again"
    tail = report.get("output_tail") or ""
    if report.get("timed_out"):
        now = f", now {limits.timeout_s:g} s" if limits else ""
        return f"the sandbox stopped it at its time limit: raise AITEAM_SANDBOX_TIMEOUT_S{now}"
    killed = report.get("killed_reason") or ""
    if killed == "memory":
        return f"it was killed at the sandbox's memory limit: {raise_memory}"
    if killed == "cpu":
        now = f", now {limits.cpu_s} s" if limits else ""
        return f"a process used up the sandbox's CPU-time limit{now} per process (it follows AITEAM_SANDBOX_TIMEOUT_S)"
    if killed == "file size":
        return "it wrote a file larger than the sandbox's file-size limit"
    if killed:
        return f"it was killed ({killed})"
    return _exit_problem(report.get("exit_code", 0), bool(report.get("not_started")), tail, raise_memory)


def _exit_problem(code: int, not_started: bool, tail: str, raise_memory: str) -> str:
    if code in (0, 1):  # a session that never started ran no test, the canaries included, whatever its exit code
        if not not_started:
            return ""
        why = _missing_module(tail) or _last_error(tail) or "the output says why"
        return f"pytest stopped before its session started (exit {code}), so no test ran: {why}"
    what = _EXIT_CODES.get(code, f"pytest exited with {code}")
    if "MemoryError" in tail:
        return f"{what}: the tests ran out of memory (MemoryError in the output): {raise_memory}"
    if code == 4 and (missing := _missing_module(tail)):  # a conftest or a -p plugin: not a plugin's unknown option
        where = "a conftest.py could not be imported: " if "ImportError while loading conftest" in tail else ""
        return f"{what}: {where}{missing}"
    advice = _WHAT_TO_DO.get(code, "the output's last lines say why")
    return f"{what}: {advice}"


def _missing_module(tail: str) -> str:
    """What to do about the last import error in a run's output, quoting it; "" when there is none."""
    errors = _IMPORT_ERROR.findall(tail)
    if not errors:
        return ""
    return (f"the output shows `{errors[-1].strip()}`: a module the tests import is missing. It must be in the "
            f"repository's test dependencies ({_TEST_DEPENDENCIES}), or importable from the checkout")


def _last_error(tail: str) -> str:
    """The last line of the output's last traceback (the exception pytest stopped on), quoted."""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return f"the output ends on `{lines[-1][:300]}`" if lines else ""


def recorded_command(prepared: Mapping[str, Any], extra_paths: Iterable[str] = ()) -> TestCommand:
    """The command the baseline ran, read at the base commit (a change to the repository's own configuration does
    not decide how that change is judged), plus paths it would not collect (QC's files elsewhere)."""
    data = {k: tuple(v) if isinstance(v, list) else v for k, v in prepared["test_command"].items()}
    command = TestCommand(**data)
    missing = [p for p in extra_paths if not any(_under(p, path) for path in command.paths)]
    return replace(command, paths=(*command.paths, *missing)) if missing else command


def recorded_environment(prepared: Mapping[str, Any], *, cache_dir: Path, sources: PackageSources,
                         base_tree: Callable[[], Path]) -> Environment:
    """The venv the baseline ran in; built again (prepare_environment is keyed, so it is the same one) from the
    base commit's files when the cache lost it."""
    data = prepared["environment"]
    recorded = Environment(Path(), data["key"], True, 0.0, tuple(data["dependency_files"]), tuple(data["requirements"]),
                           tuple(data["notes"]), tuple(data.get("constraints", ())))  # older records have none
    command = recorded_command(prepared)
    return ready_environment(cache_dir, recorded) or prepare_environment(
        base_tree(), cache_dir=cache_dir, sources=sources, runner_packages=("pytest", *command.plugins))


def judged_run(checkout: Path, prepared: Mapping[str, Any], environment: Environment, *, limits: SandboxLimits,
               extra_paths: Iterable[str] = (), only: Sequence[str] = ()) -> RepoRun:
    """The recorded command over the checkout (and extra_paths), or over `only` (the reproduction tests at the
    base commit: the rest of the suite's outcomes there are the baseline's already)."""
    command = recorded_command(prepared, extra_paths)
    if only:
        command = replace(command, paths=tuple(only))
    return run_repository(checkout, command, environment, limits=limits)


def judged_report(after: RepoRun, prepared: Mapping[str, Any], *, reproductions: Iterable[str] | None = None,
                  at_base: RepoRun | None = None, limits: SandboxLimits | None = None) -> dict[str, Any]:
    """The run's report judged against the baseline. reproductions: the reproduction tests' ids (None: this run
    has none to check; empty: it should have, and none ran). `failing_tests` are the tests that fail now and are
    the change's to answer for; a reproduction that passes at the base commit fails the run without being one.
    A run that did not really run the tests (run_problem: pytest interrupted or refusing its command, killed at a
    limit), here or at the base commit, is never ok, whatever its outcomes say: `comparison.not_run` says why."""
    data = prepared["baseline"]
    baseline = Baseline(dict(data["outcomes"]), tuple(data["flaky"]), tuple(data["passing"]))
    checks = list(reproductions) if reproductions is not None else []
    comparison = compare(baseline, after.outcomes, reproductions=checks,
                         reproductions_at_base=at_base.outcomes if at_base else None)
    added_failing = [test for test in comparison.added if after.outcomes[test] in FAILED]
    failing = [*comparison.broken, *comparison.disappeared, *added_failing]
    missing = reproductions is not None and not checks
    report = after.report.to_dict()
    not_run = _not_run(report, at_base, limits)
    ok = (not failing and not missing and all(r.ok for r in comparison.reproductions) and not report["tampered"]
          and not report["unjudged"] and not report["timed_out"] and not not_run)
    report.update(ok=ok, failing_tests=failing[:MAX_TEST_IDS], failing_tests_total=len(failing), comparison={
        **comparison.to_dict(), "ok": ok, "not_run": not_run, "added_failing": added_failing,
        "flaky": list(baseline.flaky),
        "reproduction_missing": missing, "judged": len(baseline.passing) + len(comparison.added),
        "judged_failing": len(failing),
        "already_failing": sorted(t for t, kind in after.outcomes.items() if kind in FAILED
                                  and baseline.outcomes.get(t) in FAILED)[:MAX_TEST_IDS]})
    return report


def _not_run(report: Mapping[str, Any], at_base: RepoRun | None, limits: SandboxLimits | None) -> str:
    if problem := run_problem(report, limits=limits):
        return f"the tests did not run: {problem}"
    if at_base is not None and (problem := run_problem(at_base.report.to_dict(), limits=limits)):
        return f"the reproduction tests did not run at the base commit: {problem}"
    return ""


def _under(path: str, root: str) -> bool:
    root = root.split("::", 1)[0].rstrip("/")
    return root in ("", ".") or path == root or path.startswith(f"{root}/")
