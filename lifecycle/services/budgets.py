"""Budget accounting: spend, limits and verdicts (lifecycle.services.budget_gate checks every step with them).

Spend is derived from the records, never kept as a counter that could drift:
- steps: Step rows claimed at least once (runs > 0), not counting steps parked by this gate;
- sandbox_runs: such steps of the sandbox kinds (self_test, qc_run);
- tokens: input + output + cache read + cache write tokens of the requirement's LLMCall rows;
- cost_usd: the cost_usd of those rows (agents/llm/pricing.py).
A role's spend is the same, restricted to its steps (Step.key → ROLE_OF_STEP) and its calls (LLMCall.role).

A step may start
while every dimension it uses has spent < limit, for the requirement and for its role; the step
that crosses a limit finishes (a model call is not cut off half-way), so spend can exceed a limit
by at most one step's worth.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import F, Q, QuerySet, Sum

from lifecycle import budget_limits as bl
from lifecycle import step_keys
from lifecycle.models import LLMCall, Requirement, Step
from lifecycle.services import leases
from lifecycle.states import StepState

log = logging.getLogger("aiteam.progress")
PARKED = "budget exhausted"  # the error prefix of a step this gate stopped; a decision re-queues or drops it
DROPPED = "dropped: partial output approved"  # … of a parked step whose phase output a human accepted instead
TOKENS = F("input_tokens") + F("output_tokens") + F("cache_read_tokens") + F("cache_creation_tokens")
USES = {"sandbox": (bl.STEPS, bl.SANDBOX_RUNS), "delivery": (bl.STEPS,)}
LLM_USES = (bl.STEPS, bl.TOKENS, bl.COST_USD)


@dataclass(frozen=True)
class Exhausted:
    scope: str  # "requirement" or "role:<name>"
    dimension: str
    limit: Any
    spent: Any

    def __str__(self) -> str:
        return f"{self.scope} {self.dimension} {self.spent}/{self.limit}"

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "dimension": self.dimension, "limit": _json(self.limit), "spent": _json(self.spent)}


def uses(role: str) -> tuple[str, ...]:
    """The dimensions a step of this role spends."""
    return USES.get(role, LLM_USES)


def role_kinds(role: str) -> list[str]:
    return [kind for kind, owner in step_keys.ROLE_OF_STEP.items() if owner == role]


def started_steps() -> QuerySet[Step]:
    """Steps that used their resources: claimed at least once, not stopped by this gate before they ran."""
    stopped = Q(error__startswith=PARKED) | Q(error__startswith=DROPPED)
    return Step.objects.filter(runs__gt=0).exclude(Q(state=StepState.SKIPPED) & stopped)


def parked_steps(requirement: Requirement) -> QuerySet[Step]:
    return Step.objects.filter(requirement=requirement, state=StepState.SKIPPED, error__startswith=PARKED)


# --- limits and verdicts -----------------------------------------------------------------------
def limits_for(playbook: str, project_settings: dict[str, Any] | None, overrides: dict[str, Any] | None) -> dict:
    """The effective limits; a broken project layer is logged and ignored (the admin form refuses one). A limit
    beyond its maximum, stored before the bounds, is read as the maximum (budget_limits.normalize)."""
    project = (project_settings or {}).get("budgets") or {}
    if found := bl.shape_problems(project):
        log.error("project budgets are invalid, using the playbook's defaults: %s", "; ".join(found))
        project = {}
    return bl.resolve(playbook, project, overrides or {})


def exhausted(limits: dict[str, Any], spend: dict[str, dict[str, Any]], role: str) -> list[Exhausted]:
    """Every dimension this role's step uses whose limit is reached, for the requirement and for the role."""
    found = []
    for scope in (bl.REQUIREMENT, f"role:{role}"):
        for dimension in uses(role):
            limit = bl.limit_of(limits, scope, dimension)
            spent = spend[scope][dimension]
            if limit is not None and spent >= limit:
                found.append(Exhausted(scope, dimension, limit, spent))
    return found


def standing(limits: dict[str, Any], spend: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Spent, limit and remaining per scope and dimension (None = unlimited), ready for JSON."""
    table = {}
    for scope, spent in spend.items():
        table[scope] = {}
        for dimension in bl.DIMENSIONS:
            limit = bl.limit_of(limits, scope, dimension)
            remaining = None if limit is None else max(limit - spent[dimension], limit * 0)  # dollars stay Decimal
            table[scope][dimension] = {"limit": _json(limit), "spent": _json(spent[dimension]),
                                       "remaining": _json(remaining)}
    return table


# --- reading spend for display and decisions ---------------------------------------------------
def spend_of(requirement: Requirement, *, besides: leases.Lease | None = None) -> dict[str, dict[str, Any]]:
    """Spend per scope: the requirement and every role that spent anything (two grouped queries); `besides`:
    leave that step out (a step being checked counts the steps before it, not itself)."""
    spend: dict[str, dict[str, Any]] = {bl.REQUIREMENT: dict.fromkeys(bl.DIMENSIONS, 0)}
    spend[bl.REQUIREMENT][bl.COST_USD] = Decimal(0)
    for role, tokens, cost in (LLMCall.objects.filter(requirement=requirement).order_by().values("role")
                               .annotate(t=Sum(TOKENS), c=Sum("cost_usd")).values_list("role", "t", "c")):
        _add(spend, role, {bl.TOKENS: tokens or 0, bl.COST_USD: cost or Decimal(0)})
    started = started_steps().filter(requirement=requirement)
    if besides is not None:
        started = started.exclude(key=besides.key, attempt=besides.attempt)
    for key in started.values_list("key", flat=True):
        kind = step_keys.kind_of(key)
        sandbox = int(kind in step_keys.SANDBOX_STEPS)
        _add(spend, step_keys.ROLE_OF_STEP.get(kind, kind), {bl.STEPS: 1, bl.SANDBOX_RUNS: sandbox})
    return spend


def cell_text(cell: dict[str, Any]) -> str:
    """One scope and dimension of `standing` for people: "3 / 10 (7 left)", "3 / unlimited"."""
    if cell.get("limit") is None:
        return f"{cell.get('spent')} / unlimited"
    return f"{cell.get('spent')} / {cell['limit']} ({cell.get('remaining')} left)"


def budget_report(requirement: Requirement) -> dict[str, Any]:
    """What the API and the admin show: limits, spent and remaining per scope, and the gate's state."""
    limits = limits_for(requirement.playbook, requirement.outcome_settings, requirement.budget_overrides)
    spend = spend_of(requirement)
    for role in limits["roles"]:
        spend.setdefault(f"role:{role}", zero_spend())
    return {"exhausted": requirement.budget_exhausted, "paused_from": requirement.budget_paused_from,
            "constraints": list(requirement.injected_constraints), "overrides": requirement.budget_overrides,
            "standing": standing(limits, spend)}


def _add(spend: dict, role: str, amounts: dict[str, Any]) -> None:
    scope = spend.setdefault(f"role:{role}", zero_spend())
    for dimension, amount in amounts.items():
        spend[bl.REQUIREMENT][dimension] += amount
        scope[dimension] += amount


def zero_spend() -> dict[str, Any]:
    return {**dict.fromkeys(bl.DIMENSIONS, 0), bl.COST_USD: Decimal(0)}


def _typed(dimension: str, value: Any) -> Any:
    return Decimal(value or 0) if dimension == bl.COST_USD else int(value or 0)


def _json(value: Any) -> Any:
    """Dollars as a string to the millionth ("1.200000"); never raises: limits are bounded (budget_limits.MAXIMUM),
    and a value too large to show to the millionth in Decimal's 28 digits is shown as it is ("1E+22")."""
    if not isinstance(value, Decimal):
        return value
    if not value.is_finite() or value.adjusted() > 21:
        return str(value)
    return str(value.quantize(bl.MICRO))

