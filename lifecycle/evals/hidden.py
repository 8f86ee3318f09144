"""Hidden tests on the delivered branch: the delivered commit exported to a scratch folder, the hidden modules laid
over it, run in the sandbox: on an existing repository with the environment and test command its baseline
recorded, on a new project with the sandbox's own pytest. The team never sees them (docs/evals.md)."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from agents.environments.repository import export_commit, judged_run, recorded_command, recorded_environment
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
    was delivered, the case has none, or the branch is on a remote that is not a local path."""
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
        outcomes = _run(requirement, checkout, list(case.hidden), remote, Path(scratch))
    passed = sum(outcomes.get(test) == "passed" for test in ids)
    verdict = HiddenResult.FULL if passed == len(ids) else HiddenResult.PARTIAL if passed else HiddenResult.NONE
    return Hidden(verdict, passed, len(ids))


def _run(requirement: Requirement, checkout: Path, paths: list[str], remote: Path, scratch: Path) -> dict[str, str]:
    limits = SandboxLimits(timeout_s=settings.AITEAM_SANDBOX_TIMEOUT_S,
                           memory_bytes=settings.AITEAM_SANDBOX_MEMORY_MB * 1024 * 1024)
    if not requirement.base_sha:  # a new project: the sandbox's pytest over the whole checkout
        return _outcomes(run_tests(checkout, limits=limits))
    prepared = baseline_of(requirement)
    environment = recorded_environment(  # the baseline's venv, built again from the base commit if the cache lost it
        prepared, cache_dir=Path(settings.AITEAM_ENVIRONMENTS_ROOT),
        sources=package_sources(recorded_command(prepared)),
        base_tree=lambda: export_commit(remote, requirement.base_sha, scratch / "base"))
    return judged_run(checkout, prepared, environment, limits=limits, only=paths).outcomes


def _outcomes(report: TestReport) -> dict[str, str]:
    failing = set(report.failing_tests)
    return {test: "failed" if test in failing else "passed" for test in report.tests_run}
