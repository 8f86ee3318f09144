"""Hidden tests on the delivered branch: the delivered commit exported to a scratch folder, the hidden modules laid
over it, run in the sandbox: on an existing repository with the environment and test command its baseline
recorded, on a new project with the sandbox's own pytest. The team never sees them (docs/evals.md)."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from agents.environments.export import export_commit
from agents.environments.repository import judged_run, recorded_command, recorded_environment
from agents.sandbox import SandboxLimits, run_tests
from agents.sandbox.report import TestReport
from lifecycle.evals.suites import Case
from lifecycle.models import HiddenResult, Requirement
from lifecycle.repository_runs import package_sources
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.preparation import baseline_of
from lifecycle.states import ArtifactKind


@dataclass(frozen=True)
class Hidden:
    result: str
    passed: int = 0
    total: int = 0
    error: str = ""


def judge(requirement: Requirement, case: Case) -> Hidden:
    """The hidden tests on what the requirement delivered: full, partial or none passing; not run when nothing
    was delivered, the case has none, or the branch is on a remote that is not a local path. A run whose report
    cannot be believed (tampered with, unjudged, stopped at a limit) passes none, and says why."""
    ids = case.hidden_ids
    delivery = latest(requirement, ArtifactKind.DELIVERY, "delivery")
    result = content_json(delivery) if delivery else {}
    remote = Path(str(result.get("remote_url") or ""))
    if not ids or not result.get("succeeded") or not remote.is_dir():
        return Hidden(HiddenResult.NOT_RUN, total=len(ids))
    root = Path(settings.AITEAM_ENVIRONMENTS_ROOT)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hidden-", dir=root) as scratch:
        files = {path: text.encode() for path, text in case.hidden.items()}
        checkout = export_commit(remote, result["head_commit"], Path(scratch) / "delivered", files)
        report, outcomes = _run(requirement, checkout, list(case.hidden), remote, Path(scratch))
    if problem := not_believed(report):
        return Hidden(HiddenResult.NONE, 0, len(ids), error=f"the hidden tests' report is not believed: {problem}")
    passed = sum(passed_all(test, outcomes) for test in ids)
    verdict = HiddenResult.FULL if passed == len(ids) else HiddenResult.PARTIAL if passed else HiddenResult.NONE
    return Hidden(verdict, passed, len(ids))


def not_believed(report: TestReport) -> str:
    """Why a run's outcomes cannot count as passes, or "": the code under test forged its report, its outcomes
    could not be judged, or it was stopped before it ended."""
    if report.tampered:
        return "tampered with (" + "; ".join(report.tampered) + ")"
    if report.unjudged:
        return f"unjudged ({report.unjudged})"
    if report.timed_out:
        return "timed out at the sandbox's time limit"
    if report.killed_reason:
        return f"killed at a sandbox limit ({report.killed_reason})"
    return ""


def passed_all(test: str, outcomes: dict[str, str]) -> bool:
    """A test id without parameters passed when it ran and passed under every parameter it ran with."""
    ran = [kind for name, kind in outcomes.items() if name == test or name.startswith(f"{test}[")]
    return bool(ran) and all(kind == "passed" for kind in ran)


def _run(requirement: Requirement, checkout: Path, paths: list[str], remote: Path,
         scratch: Path) -> tuple[TestReport, dict[str, str]]:
    limits = SandboxLimits(timeout_s=settings.AITEAM_SANDBOX_TIMEOUT_S,
                           memory_bytes=settings.AITEAM_SANDBOX_MEMORY_MB * 1024 * 1024)
    if not requirement.base_sha:  # a new project: the sandbox's pytest over the whole checkout
        report = run_tests(checkout, limits=limits)
        return report, _outcomes(report)
    prepared = baseline_of(requirement)
    environment = recorded_environment(  # the baseline's venv, built again from the base commit if the cache lost it
        prepared, cache_dir=Path(settings.AITEAM_ENVIRONMENTS_ROOT),
        sources=package_sources(recorded_command(prepared)),
        base_tree=lambda: export_commit(remote, requirement.base_sha, scratch / "base"))
    run = judged_run(checkout, prepared, environment, limits=limits, only=paths)
    return run.report, run.outcomes


def _outcomes(report: TestReport) -> dict[str, str]:
    failing = set(report.failing_tests)
    return {test: "failed" if test in failing else "passed" for test in report.tests_run}
