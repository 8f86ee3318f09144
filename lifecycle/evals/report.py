"""A run as a table for the terminal and as JSON for export (`aiteam_eval export RUN_ID`)."""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from lifecycle.models import EvalCase, EvalRun

CASE_FIELDS = ("name", "kind", "requirement_id", "outcome", "state", "hidden", "hidden_passed", "hidden_total",
               "quality_gate_passed", "gate_false_pass", "attempts", "loops", "gates", "llm_calls", "input_tokens",
               "output_tokens", "cache_read_tokens", "cache_creation_tokens", "wall_s", "critical_path_s", "error",
               "hidden_error")
COLUMNS = ("case", "outcome", "hidden", "gate", "steps", "tokens", "cached", "cost $", "wall s", "path s")


def cache_share(uncached: int, read: int, written: int) -> float | None:
    """The share of the input tokens read from cache (ADR 38): the API's three parts of a request's input add up
    (`input_tokens` after the last breakpoint, `cache_read_input_tokens`, `cache_creation_input_tokens`); None
    when there was no input."""
    total = uncached + read + written
    return read / total if total else None


def shown_share(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def cache_line(cases: list[EvalCase]) -> str:
    """The run's input tokens read from cache, for the line under the table."""
    totals = summary(cases)
    return (f"input tokens read from cache: {totals['cache_read_tokens']} of {totals['input_tokens_in_all']} "
            f"({shown_share(totals['cache_share'])})")


def _input(case: EvalCase) -> int:
    return case.input_tokens + case.cache_read_tokens + case.cache_creation_tokens


def run_json(run: EvalRun) -> dict[str, Any]:
    cases = list(run.cases.order_by("id"))
    return {"id": run.pk, "suite": run.suite, "bundle": run.bundle_id, "live": run.live, "provider": run.provider,
            "started_at": run.started_at.isoformat(),
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "summary": summary(cases), "cases": [case_json(case) for case in cases]}


def case_json(case: EvalCase) -> dict[str, Any]:
    return {**{name: getattr(case, name) for name in CASE_FIELDS}, "cost_usd": str(case.cost_usd)}


def summary(cases: list[EvalCase]) -> dict[str, Any]:
    outcomes: dict[str, int] = {}
    for case in cases:
        outcomes[case.outcome] = outcomes.get(case.outcome, 0) + 1
    return {"cases": len(cases), "outcomes": outcomes, "hidden_full": sum(c.hidden == "full" for c in cases),
            "gate_false_passes": sum(c.gate_false_pass for c in cases),
            "cost_usd": str(sum((c.cost_usd for c in cases), start=0)),
            "tokens": sum(c.input_tokens + c.output_tokens for c in cases),
            "input_tokens_in_all": sum(_input(c) for c in cases),
            "cache_read_tokens": sum(c.cache_read_tokens for c in cases),
            "cache_share": cache_share(sum(c.input_tokens for c in cases), sum(c.cache_read_tokens for c in cases),
                                       sum(c.cache_creation_tokens for c in cases))}  # None: no input at all


def table(cases: list[EvalCase]) -> str:
    rows = [COLUMNS, *(_row(case) for case in cases)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def _row(case: EvalCase) -> tuple[str, ...]:
    gate = {None: "-", True: "pass", False: "fail"}[case.quality_gate_passed]
    if case.gate_false_pass:
        gate = "FALSE PASS"
    steps = sum(role.get("steps", 0) for role in case.attempts.values())
    return (case.name, case.outcome, f"{case.hidden} {case.hidden_passed}/{case.hidden_total}", gate, str(steps),
            str(case.input_tokens + case.output_tokens),
            shown_share(cache_share(case.input_tokens, case.cache_read_tokens, case.cache_creation_tokens)),
            f"{case.cost_usd:.4f}",
            f"{case.wall_s:.1f}", f"{case.critical_path_s:.1f}")


@dataclass
class CaseChange:
    name: str
    before: EvalCase | None
    after: EvalCase | None

    @property
    def changed(self) -> list[str]:
        """What differs between the two runs: outcome, hidden tests, gate false pass, cost; 'new' or 'gone'."""
        if self.before is None or self.after is None:
            return ["new" if self.before is None else "gone"]
        fields = (("outcome", "outcome"), ("hidden", "hidden tests"), ("hidden_passed", "hidden tests"),
                  ("gate_false_pass", "gate false pass"), ("cost_usd", "cost"))
        return list(dict.fromkeys(label for name, label in fields
                                  if getattr(self.before, name) != getattr(self.after, name)))

    @property
    def cost_delta(self) -> Decimal | None:
        return None if self.before is None or self.after is None else self.after.cost_usd - self.before.cost_usd


def case_changes(before: list[EvalCase], after: list[EvalCase]) -> list[CaseChange]:
    """Two runs of a suite case by case, in the later run's order, then cases only the earlier had."""
    old, new = {c.name: c for c in before}, {c.name: c for c in after}
    return [CaseChange(name, old.get(name), new.get(name)) for name in dict.fromkeys([*new, *old])]
