"""The quality gate: a project's QualityGates applied to a QC run. Pure and deterministic."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from agents.environments.baseline import comparison_reasons
from agents.schemas.quality import ACCEPTANCE_DIR


@dataclass(frozen=True)
class QualityGates:
    min_pass_rate: float = 1.0  # share of tests that must pass
    min_coverage: float | None = None  # percent; None: not required (coverage may be unavailable)
    lint_must_pass: bool = True
    all_criteria_covered: bool = True

    @classmethod
    def from_settings(cls, raw: dict[str, Any] | None) -> QualityGates:
        allowed = {k: v for k, v in (raw or {}).items() if k in cls.__dataclass_fields__}
        return cls(**allowed)


@dataclass
class GateResult:
    passed: bool
    score: float  # 0–100: the pass rate, less 10 for lint findings and 10 per uncovered criterion; 0 if tampered
    reasons: list[str] = field(default_factory=list)
    pass_rate: float = 0.0
    lint_findings: int = 0
    uncovered: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate(gates: QualityGates, report: dict[str, Any], *, lint_findings: list[str], uncovered: list[str]) -> GateResult:
    """On an existing repository the report carries its comparison with the baseline (agents/environments): the
    pass rate is then over the tests the change answers for (those that passed in both base runs, and the ones
    it adds), and each pass-to-pass or fail-to-pass finding is a reason of its own."""
    comparison = report.get("comparison")
    rate, reasons = _repository_rate(comparison) if comparison is not None else _pass_rate(gates, report)
    if report.get("timed_out"):
        reasons.append("the test run timed out")
    if report.get("tampered"):
        reasons.append(f"tampered: the code under test forged its test report ({'; '.join(report['tampered'])})")
    coverage = report.get("coverage_percent")
    if gates.min_coverage is not None and (coverage is None or coverage < gates.min_coverage):
        reasons.append(f"coverage {coverage if coverage is not None else 'unavailable'} below {gates.min_coverage}%")
    if gates.lint_must_pass and lint_findings:
        reasons.append(f"lint: {len(lint_findings)} finding(s), first: {lint_findings[0]}")
    if gates.all_criteria_covered and uncovered:
        reasons.append(f"acceptance criteria without a test (none named, or none of those named ran): "
                       f"{', '.join(uncovered)}")
    # a forged report's pass rate says nothing
    score = 0.0 if report.get("tampered") else max(0.0, 100 * rate - 10 * bool(lint_findings) - 10 * len(uncovered))
    return GateResult(not reasons, round(score, 1), reasons, round(rate, 4), len(lint_findings), uncovered)


def _pass_rate(gates: QualityGates, report: dict[str, Any]) -> tuple[float, list[str]]:
    total = report["passed"] + report["failed"] + report["errors"]
    rate = report["passed"] / total if total else 0.0
    if rate < gates.min_pass_rate or not total:
        return rate, [f"pass rate {rate:.0%} below {gates.min_pass_rate:.0%} ({report['failed']} failed, "
                      f"{report['errors']} errors)"]
    return rate, []


def _repository_rate(comparison: dict[str, Any]) -> tuple[float, list[str]]:
    """Any pass-to-pass or new-test failure fails the gate whatever the project's min_pass_rate: the run is
    compared per test, not as a share."""
    total, failing = comparison["judged"], comparison["judged_failing"]
    reasons = comparison_reasons(comparison)
    if not total:
        reasons.append("no test the change answers for ran: none passed at the base commit and the change adds none")
    return ((total - failing) / total if total else 0.0), reasons


def uncovered(criteria: list[str], coverage: dict[str, list[str]], report: dict[str, Any]) -> list[str]:
    """The criteria no acceptance test covers in this run: QC named no test for them, or none of the tests it
    named ran from tests/acceptance/ (skipped, or never reached). Judged on QC's names alone when the run cannot
    say which ran: no test ran (it died, or nothing was collected), a test module failed to import (pytest then
    stops before running anything; an acceptance module that cannot import what the engineer's code should
    offer is the engineer's failure, reported as such), the report predates the list of tests run (a replay
    of an older run), or the stored list was cut among the acceptance tests (agents.sandbox.report keeps them
    first, so that happens only when they alone fill it)."""
    ran = report.get("tests_run")
    broken = [f for f in report.get("failing_tests", []) if "::" not in f]  # a module's collection error
    acceptance = None if not ran or broken else [test for test in ran if test.startswith(ACCEPTANCE_DIR)]
    if acceptance is not None and report.get("tests_run_total", 0) > len(ran) == len(acceptance):
        acceptance = None

    def covered(criterion: str) -> bool:
        names = coverage.get(criterion) or []
        return bool(names) and (acceptance is None or any(_is_test(name, acceptance) for name in names))

    return [c for c in criteria if not covered(c)]


def _is_test(name: str, tests: list[str]) -> bool:
    """Whether `name` (as QC wrote it: "test_x", "TestY::test_x", "test_a.py::test_x", a whole id, with or without
    parameters) names one of `tests` (pytest ids: "tests/acceptance/test_a.py::TestY::test_x[1]")."""
    bare = name.split("[")[0]
    return any(test == name or test.endswith((f"::{name}", f"/{name}"))
               or _unparametrized(test) == bare or _unparametrized(test).endswith((f"::{bare}", f"/{bare}"))
               for test in tests)


def _unparametrized(test: str) -> str:
    """"tests/acceptance/a.py::TestY::test_x[1-2]" → "tests/acceptance/a.py::TestY::test_x"."""
    return test.split("[", 1)[0]
