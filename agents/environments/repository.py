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

import io
import tarfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from agents.environments.baseline import FAILED, Baseline, compare, counts
from agents.environments.prepare import Environment, PackageSources, prepare_environment, ready_environment
from agents.environments.run import run_baseline, run_repository
from agents.environments.testcmd import TestCommand, detect_test_command
from agents.repo.files import git
from agents.sandbox.isolation import SandboxLimits
from agents.sandbox.report import MAX_TEST_IDS
from agents.sandbox.runner import RepoRun

_REPORT_KEYS = ("passed", "failed", "errors", "skipped", "duration_s", "exit_code", "timed_out", "killed_reason",
                "isolation", "tampered", "output_tail")


class BaselineUnusable(ValueError):
    """The base commit's own tests cannot judge a change (their run forged its report); a person looks."""


def prepare_repository(root: Path, *, configured: str | None, cache_dir: Path, sources: Callable[[TestCommand], PackageSources],
                       limits: SandboxLimits) -> dict[str, Any]:
    """The test command, the environment (built or reused) and the two base runs of the checkout at root.
    NotPython, BadTestCommand, BadDependencies, InstallFailed and BaselineUnusable are for a person."""
    command = detect_test_command(root, configured=configured)
    environment = prepare_environment(root, cache_dir=cache_dir, sources=sources(command),
                                      runner_packages=("pytest", *command.plugins))
    runs = run_baseline(root, command, environment, limits=limits)
    forged = sorted({reason for report in runs.reports for reason in report.tampered})
    if forged:
        raise BaselineUnusable("the repository's own tests forged their report at the base commit, so no change can "
                               f"be judged against them: {'; '.join(forged)}")
    return {
        "test_command": asdict(command),
        "environment": {k: v for k, v in asdict(environment).items() if k != "venv"},
        "runs": [dict(outcomes) for outcomes in runs.outcomes],
        "baseline": runs.baseline.to_dict(),
        "flaky": list(runs.baseline.flaky),
        "counts": counts(runs.baseline.outcomes),
        "reports": [{k: report.to_dict()[k] for k in _REPORT_KEYS} for report in runs.reports],
    }


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
                           tuple(data["notes"]))
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
                  at_base: RepoRun | None = None) -> dict[str, Any]:
    """The run's report judged against the baseline. reproductions: the reproduction tests' ids (None: this run
    has none to check; empty: it should have, and none ran). `failing_tests` are the tests that fail now and are
    the change's to answer for; a reproduction that passes at the base commit fails the run without being one."""
    data = prepared["baseline"]
    baseline = Baseline(dict(data["outcomes"]), tuple(data["flaky"]), tuple(data["passing"]))
    checks = list(reproductions) if reproductions is not None else []
    comparison = compare(baseline, after.outcomes, reproductions=checks,
                         reproductions_at_base=at_base.outcomes if at_base else None)
    added_failing = [test for test in comparison.added if after.outcomes[test] in FAILED]
    failing = [*comparison.broken, *comparison.disappeared, *added_failing]
    missing = reproductions is not None and not checks
    report = after.report.to_dict()
    ok = (not failing and not missing and all(r.ok for r in comparison.reproductions) and not report["tampered"]
          and not report["timed_out"])
    report.update(ok=ok, failing_tests=failing[:MAX_TEST_IDS], failing_tests_total=len(failing), comparison={
        **comparison.to_dict(), "ok": ok, "added_failing": added_failing, "flaky": list(baseline.flaky),
        "reproduction_missing": missing, "judged": len(baseline.passing) + len(comparison.added),
        "judged_failing": len(failing),
        "already_failing": sorted(t for t, kind in after.outcomes.items() if kind in FAILED
                                  and baseline.outcomes.get(t) in FAILED)[:MAX_TEST_IDS]})
    return report


def export_commit(repository: Path, sha: str, dest: Path, files: Mapping[str, bytes] | None = None) -> Path:
    """The tree of commit `sha` of the git repository at `repository`, written to dest (no .git), with `files`
    (relative path → bytes) laid over it: the base commit plus QC's reproduction tests."""
    archive = git(repository, "archive", "--format=tar", sha)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")  # refuses links and paths out of dest
    for path, data in (files or {}).items():
        target = (dest / path).resolve()
        if dest.resolve() not in target.parents:
            raise ValueError(f"{path} is outside the checkout")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return dest


def _under(path: str, root: str) -> bool:
    root = root.split("::", 1)[0].rstrip("/")
    return root in ("", ".") or path == root or path.startswith(f"{root}/")
