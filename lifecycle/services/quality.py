"""The independent quality gate: QC's acceptance tests, the gate decision, DevOps artifacts,
and the deployment approval task."""
from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.ci_config import check_workflow
from agents.quality import QualityGates, evaluate, uncovered
from agents.schemas import DevOpsOutput, QCOutput, SourceFile
from lifecycle import step_keys
from lifecycle.actors import Actor
from lifecycle.contexts import acceptance_criteria_of
from lifecycle.models import Requirement
from lifecycle.services.artifacts import artifact_store, content_json, latest
from lifecycle.services.development import (
    ensure_not_timed_out,
    next_attempt,
    store_code,
    workspace_commit,
    workspace_for,
)
from lifecycle.services.gate_routing import gate_failure_route, qc_tests_rewrite
from lifecycle.services.leases import Lease, lock_for_apply, step_applying, step_finish
from lifecycle.services.outbox import emit
from lifecycle.services.reviews import review_open
from lifecycle.services.scheduling import step_schedule
from lifecycle.services.scope_guard import review_summary, scope_record
from lifecycle.services.transitions import transition
from lifecycle.states import ArtifactKind, ReviewKind

QC = Actor.agent("qc_engineer")
DEVOPS = Actor.agent("devops_engineer")
CI_PATH = ".github/workflows/ci.yml"


def start_quality_gate(requirement: Requirement) -> None:
    """In test_pending: QC writes its acceptance tests once, then every round just runs them."""
    if latest(requirement, ArtifactKind.ACCEPTANCE_COVERAGE) is None:
        step_schedule(requirement_id=requirement.pk, key=step_keys.QC_TESTS, attempt=1)
    else:
        step_schedule(requirement_id=requirement.pk, key=step_keys.QC_RUN, attempt=_qc_round(requirement) + 1)


def qc_tests_apply(*, lease: Lease, output: QCOutput) -> None:
    with step_applying(lease) as (step, requirement):
        commit = workspace_commit(requirement, output.files, f"QC: acceptance tests ({len(output.files)} file(s))")
        store_code(requirement, output.files, step, requirement.dev_attempts, commit)
        artifact_store(requirement, kind=ArtifactKind.ACCEPTANCE_COVERAGE, name="acceptance", content=output.coverage,
                       summary=output.reasoning, metadata={"untestable": output.untestable}, step=step, role=QC.role)
        step_schedule(requirement_id=requirement.pk, key=step_keys.QC_RUN, attempt=_qc_round(requirement) + 1)


def qc_run_apply(*, lease: Lease, output: dict[str, Any]) -> None:
    """Decide the gate: pass → DevOps (on an existing repository: ready to deploy, and the deployment approval);
    fail → the failure classifier decides (gate_routing)."""
    ensure_not_timed_out(output["report"])  # the sandbox's limit, not the code: raised and retried
    with transaction.atomic():
        step, requirement = lock_for_apply(lease)
        report, lint = output["report"], output["lint"]
        gates = _gates(requirement)
        result = evaluate(gates, report, lint_findings=lint, uncovered=_uncovered(requirement, report))
        artifact_store(requirement, kind=ArtifactKind.TEST_REPORT, name="qc", content={**report, "lint": lint,
                       "gate": result.to_dict()}, summary=f"quality score {result.score}: {'; '.join(result.reasons) or 'pass'}",
                       metadata={"round": lease.attempt, "ok": result.passed, "score": result.score,
                                 "passed": report["passed"], "failed": report["failed"], "errors": report["errors"]},
                       step=step, role=QC.role)
        step_finish(step)
        if result.passed:
            emit(requirement, "QualityGatePassed", {"round": lease.attempt, "score": result.score})
            if requirement.base_sha:  # an existing repository keeps its own CI: no DevOps step (docs/adr/0035)
                transition(requirement, "pass_quality_gate", actor=QC, metadata={"round": lease.attempt})
                _ask_for_deployment(requirement, workspace_for(requirement).diff_summary(), "", lease.attempt)
                return
            step_schedule(requirement_id=requirement.pk, key=step_keys.DEVOPS, attempt=lease.attempt)
        elif not qc_tests_rewrite(requirement, gates=gates, result=result, report=report):
            gate_failure_route(requirement, step=step, gates=gates, result=result, report=report)


def devops_apply(*, lease: Lease, output: DevOpsOutput) -> None:
    """Commit the CI workflow, keep runbook and rollback, move to ready_to_deploy and ask for approval."""
    with step_applying(lease) as (step, requirement):
        commit = workspace_commit(requirement, [SourceFile(path=CI_PATH, content=output.ci_workflow)], "DevOps: CI workflow")
        check = check_workflow(output.ci_workflow)  # validated already; recomputed for the record
        artifact_store(requirement, kind=ArtifactKind.CI_CONFIG, name=CI_PATH, content=output.ci_workflow,
                       summary=f"runs: {check.test_command}", metadata={"commit": commit, "ok": check.ok,
                       "test_command": check.test_command, "problems": check.problems}, step=step, role=DEVOPS.role)
        for name, text in (("runbook", output.runbook), ("rollback", output.rollback)):
            artifact_store(requirement, kind=ArtifactKind.RUNBOOK, name=name, content=text, summary=text[:200],
                           step=step, role=DEVOPS.role)
        transition(requirement, "pass_quality_gate", actor=DEVOPS, metadata={"round": lease.attempt})
        _ask_for_deployment(requirement, workspace_for(requirement).diff_summary(), output.ci_workflow, lease.attempt)


def deployment_rejected(requirement: Requirement, *, actor: Actor, reason: str) -> None:
    """ready_to_deploy → test_pending (the human said no) → in_development with the reason as the failure."""
    transition(requirement, "reject_deployment", actor=actor, metadata={"reason": reason})
    emit(requirement, "TestsFailed", {"source": "deployment_review", "failures": [reason]})
    transition(requirement, "fail_quality_gate", actor=actor, metadata={"reason": reason})
    next_attempt(requirement)


def _ask_for_deployment(requirement: Requirement, diff: list[str], ci: str, round: int) -> None:
    qc = latest(requirement, ArtifactKind.TEST_REPORT, "qc")
    data = content_json(qc)
    # On an existing repository the change is measured from its merge base; an empty one raises EmptyChange.
    scope = {"scope": review_summary(scope_record(requirement))} if requirement.base_sha else {}
    review_open(
        requirement, kind=ReviewKind.DEPLOYMENT_APPROVAL, round=round,
        question="The quality gate passed. Approve delivering this branch, or reject with a reason.",
        reasoning=qc.summary,
        context={"quality_score": qc.metadata["score"], "tests": {k: data[k] for k in ("passed", "failed", "errors")},
                 "gate": data["gate"]["reasons"], "ci_config": ci, "diff_summary": diff,
                 "branch": workspace_for(requirement).branch, **scope},
        resume_target=step_keys.DELIVER,
    )


def _gates(requirement: Requirement) -> QualityGates:
    return QualityGates.from_settings(requirement.outcome_settings.get("quality_gates"))


def _uncovered(requirement: Requirement, report: dict[str, Any]) -> list[str]:
    coverage = content_json(latest(requirement, ArtifactKind.ACCEPTANCE_COVERAGE))
    return uncovered([c.id for c in acceptance_criteria_of(requirement)], coverage, report)


def _qc_round(requirement: Requirement) -> int:
    return requirement.artifacts.filter(kind=ArtifactKind.TEST_REPORT, name="qc").count()
