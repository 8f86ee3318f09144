"""The quality gate: a project's QualityGates applied to a QC run. Pure and deterministic."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


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
    score: float  # 0–100: the pass rate, less 10 for lint findings and 10 per uncovered criterion
    reasons: list[str] = field(default_factory=list)
    pass_rate: float = 0.0
    lint_findings: int = 0
    uncovered: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate(gates: QualityGates, report: dict[str, Any], *, lint_findings: list[str], uncovered: list[str]) -> GateResult:
    total = report["passed"] + report["failed"] + report["errors"]
    rate = report["passed"] / total if total else 0.0
    reasons = []
    if rate < gates.min_pass_rate or not total:
        reasons.append(f"pass rate {rate:.0%} below {gates.min_pass_rate:.0%} ({report['failed']} failed, "
                       f"{report['errors']} errors)")
    if report.get("timed_out"):
        reasons.append("the test run timed out")
    coverage = report.get("coverage_percent")
    if gates.min_coverage is not None and (coverage is None or coverage < gates.min_coverage):
        reasons.append(f"coverage {coverage if coverage is not None else 'unavailable'} below {gates.min_coverage}%")
    if gates.lint_must_pass and lint_findings:
        reasons.append(f"lint: {len(lint_findings)} finding(s), first: {lint_findings[0]}")
    if gates.all_criteria_covered and uncovered:
        reasons.append(f"acceptance criteria without a test (none named, or none of those named ran): "
                       f"{', '.join(uncovered)}")
    score = max(0.0, 100 * rate - 10 * bool(lint_findings) - 10 * len(uncovered))
    return GateResult(not reasons, round(score, 1), reasons, round(rate, 4), len(lint_findings), uncovered)
