"""Where a failed quality gate goes, decided by the failure classifier (lifecycle.failure_rules):

- acceptance criteria whose named tests did not run (skipped, deselected, never collected), or a bug's
  reproduction tests that pass at the base commit (they do not reproduce it) → QC's own slip: QC writes its
  tests again with the finding, QC_REWRITES times at most for each (qc_tests_rewrite, before the classifier;
  a map that names no test at all is refused earlier, by QCOutput's validator); a reproduction still passing
  at base after that → a human (the classifier's reproduction_passes_at_base);
- acceptance criteria no QC test covers after that, or that QC declared untestable → the business
  analyst's question, put to a human: the table has no edge from test_pending back to the stories, and
  changed criteria need a human anyway. The requirement stays in test_pending; an escalation task
  (resume target qc_tests) asks the reviewer, acting for the BA, to restate the criteria so they can be
  tested; QC then writes its tests again with that text (or the reviewer rejects: cancelled);
- a report the code under test forged (tampered, ADR 25), or the same failure as before the last fix →
  a human: test_pending → in_development → escalated
  (two legal edges), with the usual escalation task;
- anything else (failing tests, pass rate, coverage, lint) → the engineer's next attempt.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from agents.quality import GateResult, QualityGates
from lifecycle import step_keys
from lifecycle.actors import Actor
from lifecycle.contexts import NOT_REPRODUCED, TESTS_NOT_RUN, acceptance_criteria_of
from lifecycle.failure_rules import Failure, Route, Source, classify
from lifecycle.models import Requirement, Step
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.development import development_escalate, next_attempt
from lifecycle.services.failures import failure_route_record, failure_with_history
from lifecycle.services.meta_eval import quality_gate_failed
from lifecycle.services.outbox import emit
from lifecycle.services.reviews import review_open
from lifecycle.services.scheduling import step_schedule
from lifecycle.services.transitions import transition
from lifecycle.states import ArtifactKind, ReviewKind

QC = Actor.agent("qc_engineer")
CODE_FAILURES = ("failing_tests", "gate_findings")  # the quality gate refused the code itself, not QC's tests
QC_REWRITES = 1  # how often the gate hands QC's own tests back before a person looks (docs/adr/0026)
ACTIONS = {
    Route.BUSINESS_ANALYST: "an escalation task asks a human, for the business analyst, to restate the criteria",
    Route.HUMAN: "back to development and escalated to a human",
    Route.ENGINEER: "back to development: the engineer's next attempt gets the failures",
}


def gate_failure_route(
    requirement: Requirement, *, step: Step, gates: QualityGates, result: GateResult, report: dict[str, Any],
) -> Route:
    """Inside qc_run_apply's transaction: classify the failed gate, record the route, carry it out. An
    uncovered criterion counts only where the project gates on coverage of the criteria."""
    uncovered = tuple(result.uncovered) if gates.all_criteria_covered else ()
    failure = failure_with_history(requirement=requirement, failure=Failure(
        source=Source.QUALITY_GATE, step=step_keys.QC_RUN, tests_failed=not report.get("ok", False),
        failing_tests=tuple(report["failing_tests"][:50]), uncovered_criteria=uncovered,
        gate_reasons=tuple(result.reasons), tampered=tuple(report.get("tampered") or ()),
        not_reproducing=tuple(passing_at_base(report))))
    routing = classify(failure)
    route = routing.route if routing.route in ACTIONS else Route.ENGINEER
    action = ACTIONS[route] if route == routing.route else \
        f"{ACTIONS[route]} (the classifier's route {routing.route} has no path from the quality gate)"
    failure_route_record(requirement=requirement, failure=failure, routing=replace(routing, route=route), step=step,
                         summary=f"quality gate: {'; '.join(result.reasons)}", action=action)
    if routing.first in CODE_FAILURES:  # the code failed the gate that code review had passed
        quality_gate_failed(requirement, rule=routing.first)
    if route == Route.BUSINESS_ANALYST:
        _ask_for_testable_criteria(requirement, uncovered=failure.uncovered_criteria)
        return route
    _back_to_development(requirement, result, report)
    if route == Route.HUMAN:
        development_escalate(requirement, report=report, reason=routing.first)
    else:
        next_attempt(requirement)
    return route


def qc_tests_rewrite(requirement: Requirement, *, gates: QualityGates, result: GateResult,
                     report: dict[str, Any]) -> bool:
    """Inside qc_run_apply's transaction, before the classifier: criteria QC mapped to tests that did not run, and
    reproduction tests that pass at the base commit, go back to QC (its tests, its map) with the finding, while it
    has rewrites left for that finding. True when QC was asked."""
    named = content_json(latest(requirement, ArtifactKind.ACCEPTANCE_COVERAGE)) or {}
    not_run = {c: named[c] for c in result.uncovered if named.get(c)} if gates.all_criteria_covered else {}
    findings = [(TESTS_NOT_RUN, {"criteria": not_run}) if not_run else None,
                (NOT_REPRODUCED, {"tests": passing_at_base(report)}) if passing_at_base(report) else None]
    handed = [(name, payload) for name, payload in filter(None, findings)
              if requirement.events.filter(name=name).count() < QC_REWRITES]
    for name, payload in handed:
        emit(requirement, name, payload)
    if handed:
        written = requirement.artifacts.filter(kind=ArtifactKind.ACCEPTANCE_COVERAGE).count()
        step_schedule(requirement_id=requirement.pk, key=step_keys.QC_TESTS, attempt=written + 1)
    return bool(handed)


def passing_at_base(report: dict[str, Any]) -> list[str]:
    """A bug's reproduction tests that passed at the base commit: they do not show the bug, whatever the change."""
    checks = (report.get("comparison") or {}).get("reproductions") or []
    return [check["test"] for check in checks if check.get("at_base") == "passed"]


def acceptance_criteria_restated(requirement: Requirement, *, actor: Actor, guidance: str) -> None:
    """A human answered for the BA: QC writes its acceptance tests again, with the restated criteria."""
    emit(requirement, "AcceptanceCriteriaRestated", {"by": actor.role or "human", "guidance": guidance})
    written = requirement.artifacts.filter(kind=ArtifactKind.ACCEPTANCE_COVERAGE).count()
    step_schedule(requirement_id=requirement.pk, key=step_keys.QC_TESTS, attempt=written + 1)


def _ask_for_testable_criteria(requirement: Requirement, *, uncovered: tuple[str, ...]) -> None:
    coverage = latest(requirement, ArtifactKind.ACCEPTANCE_COVERAGE)
    named, untestable = (content_json(coverage), coverage.metadata.get("untestable", {})) if coverage else ({}, {})
    criteria = [{**c.model_dump(), "untestable_because": untestable.get(c.id, ""), "tests_not_run": named.get(c.id, [])}
                for c in acceptance_criteria_of(requirement) if c.id in uncovered]
    emit(requirement, "AcceptanceGapFound", {"uncovered": list(uncovered)})
    review_open(
        requirement, kind=ReviewKind.ESCALATION,
        question=f"QC has no acceptance test that runs for {len(criteria)} criterion(s): it declared them "
        "untestable as written, or the tests it named did not run after it wrote them again. Acting for the "
        "business analyst, restate them so they can be tested (request changes with the restated criteria): QC "
        "then writes its acceptance tests again. Or reject to cancel the requirement.",
        reasoning=coverage.summary if coverage else "",
        context={"routed_to": Route.BUSINESS_ANALYST.value, "uncovered_criteria": criteria,
                 "coverage": content_json(coverage) if coverage else {}},
        resume_target=step_keys.QC_TESTS,
    )


def _back_to_development(requirement: Requirement, result: GateResult, report: dict[str, Any]) -> None:
    failures = report["failing_tests"][:50] + result.reasons
    emit(requirement, "TestsFailed", {"source": "qc", "failures": failures})
    transition(requirement, "fail_quality_gate", actor=QC, metadata={"reasons": result.reasons,
                                                                     "failing": report["failing_tests"][:50]})
