"""Budget limits: what a requirement and each of its roles may spend. Pure: no ORM, no settings.

A budget is `{"requirement": {dimension: limit}, "roles": {role: {dimension: limit}}}`. Layers,
later wins, key by key: the playbook's defaults (below), the project's `settings["budgets"]`,
then the requirement's own overrides (written when a human overrides the budget). A limit of
None means unlimited; a dimension left out inherits the layer below.
"""
from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any

STEPS, TOKENS, SANDBOX_RUNS, COST_USD = "steps", "tokens", "sandbox_runs", "cost_usd"
DIMENSIONS = (STEPS, TOKENS, SANDBOX_RUNS, COST_USD)
ROLES = ("product_owner", "business_analyst", "tech_architect", "tech_lead", "senior_engineer", "qc_engineer",
         "devops_engineer", "sandbox", "delivery")
REQUIREMENT = "requirement"
GRACE_FRACTION = Decimal("0.5")  # inject a constraint / approve partial output: half the limit again

# Generous for a real model (the sample run spends 16 steps, 3 sandbox runs, ~80k tokens, under $1);
# a bug fix skips stories and design, so it gets less.
PLAYBOOK_DEFAULTS: dict[str, dict[str, Any]] = {
    "new_feature": {
        REQUIREMENT: {STEPS: 150, TOKENS: 5_000_000, SANDBOX_RUNS: 40, COST_USD: Decimal("50")},
        "roles": {"senior_engineer": {STEPS: 80, COST_USD: Decimal("30")}, "tech_lead": {STEPS: 40}},
    },
    "bug_fix": {
        REQUIREMENT: {STEPS: 60, TOKENS: 2_000_000, SANDBOX_RUNS: 20, COST_USD: Decimal("20")},
        "roles": {"senior_engineer": {STEPS: 30, COST_USD: Decimal("12")}, "tech_lead": {STEPS: 15}},
    },
}
DEFAULT_PLAYBOOK = "new_feature"


def defaults_for(playbook: str) -> dict[str, Any]:
    """The playbook's defaults; an unknown name falls back to new_feature's (playbooks validate names at intake)."""
    return PLAYBOOK_DEFAULTS.get(playbook, PLAYBOOK_DEFAULTS[DEFAULT_PLAYBOOK])


def resolve(playbook: str, *layers: dict[str, Any] | None) -> dict[str, Any]:
    """The effective limits: the playbook's defaults with each layer (project, requirement) laid on top."""
    merged = normalize(defaults_for(playbook))
    for layer in layers:
        merged = merge(merged, normalize(layer or {}))
    return merged


def merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    roles = {role: dict(dims) for role, dims in base.get("roles", {}).items()}
    for role, dims in top.get("roles", {}).items():
        roles[role] = {**roles.get(role, {}), **dims}
    return {REQUIREMENT: {**base.get(REQUIREMENT, {}), **top.get(REQUIREMENT, {})}, "roles": roles}


def limit_of(limits: dict[str, Any], scope: str, dimension: str) -> Any:
    """A scope is "requirement" or "role:<name>"; None means unlimited."""
    if scope == REQUIREMENT:
        return limits[REQUIREMENT].get(dimension)
    return limits["roles"].get(scope.partition(":")[2], {}).get(dimension)


def normalize(budget: dict[str, Any]) -> dict[str, Any]:
    """Validated and typed (ints, Decimal dollars); raises ValueError listing every problem."""
    found = problems(budget)
    if found:
        raise ValueError("; ".join(found))
    return {REQUIREMENT: _typed(budget.get(REQUIREMENT) or {}),
            "roles": {role: _typed(dims) for role, dims in (budget.get("roles") or {}).items()}}


def problems(budget: Any) -> list[str]:
    """Everything wrong with a budget override, in words a project admin or API client can act on."""
    if not isinstance(budget, dict):
        return ["a budget must be an object with 'requirement' and/or 'roles'"]
    found = [f"unknown key '{k}'; use 'requirement' and 'roles'" for k in budget if k not in (REQUIREMENT, "roles")]
    found += _dimension_problems(REQUIREMENT, budget.get(REQUIREMENT, {}))
    roles = budget.get("roles", {})
    if not isinstance(roles, dict):
        return [*found, "roles must be an object of role → limits"]
    for role, dims in roles.items():
        if role not in ROLES:
            found.append(f"unknown role '{role}'; use one of {', '.join(ROLES)}")
        found += _dimension_problems(f"roles.{role}", dims)
    return found


def _dimension_problems(where: str, dims: Any) -> list[str]:
    if not isinstance(dims, dict):
        return [f"{where} must be an object of dimension → limit"]
    found = []
    for name, value in dims.items():
        if name not in DIMENSIONS:
            found.append(f"{where}: unknown dimension '{name}'; use {', '.join(DIMENSIONS)}")
        elif value is not None and _number(name, value) is None:
            kind = "a number of dollars ≥ 0" if name == COST_USD else "a whole number ≥ 0"
            found.append(f"{where}.{name}: expected {kind} or null (unlimited), got {value!r}")
    return found


def _number(name: str, value: Any) -> int | Decimal | None:
    if isinstance(value, bool):
        return None
    if name == COST_USD:
        try:
            amount = Decimal(str(value))
        except InvalidOperation:
            return None
        return amount if amount.is_finite() and amount >= 0 else None
    return value if isinstance(value, int) and value >= 0 else None


def _typed(dims: dict[str, Any]) -> dict[str, Any]:
    return {name: None if value is None else _number(name, value) for name, value in dims.items()}


def grace(limit: int | Decimal, spent: int | Decimal) -> int | Decimal:
    """A new limit that leaves room again: what is spent plus half the old limit (at least one step, one cent)."""
    if isinstance(limit, Decimal) or isinstance(spent, Decimal):
        return Decimal(spent) + max(Decimal(limit) * GRACE_FRACTION, Decimal("0.01"))
    return spent + max(math.ceil(limit * GRACE_FRACTION), 1)


def as_json(budget: dict[str, Any]) -> dict[str, Any]:
    """For JSON fields and API output: dollars as strings, so no float rounding creeps in."""
    def dims(values: dict[str, Any]) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, Decimal) else v for k, v in values.items()}

    return {REQUIREMENT: dims(budget.get(REQUIREMENT, {})),
            "roles": {role: dims(values) for role, values in budget.get("roles", {}).items()}}
