"""Budget limits: what a requirement and each of its roles may spend. Pure: no ORM, no settings.

A budget is `{"requirement": {dimension: limit}, "roles": {role: {dimension: limit}}}`. Layers,
later wins, key by key: the playbook's defaults (below), the project's `settings["budgets"]`,
then the requirement's own overrides (written when a human overrides the budget). A limit of
None means unlimited; a dimension left out inherits the layer below.

Every limit is bounded (MAXIMUM, dollars to the millionth): far above any real run, small enough that a limit, its
grace and the spend compared with it stay exact as a Decimal (28 digits) and a 64-bit integer. Wherever a limit is
set (a budget decision, the Project admin, a budget profile's promotion, a policy's grace) `problems` refuses a
larger or finer one, naming the field and its maximum; a limit stored before the bounds (or written by hand) is
read as the maximum (`normalize`, `shape_problems`), so reading a budget never fails on it.
"""
from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from lifecycle.errors import capped

STEPS, TOKENS, SANDBOX_RUNS, COST_USD = "steps", "tokens", "sandbox_runs", "cost_usd"
DIMENSIONS = (STEPS, TOKENS, SANDBOX_RUNS, COST_USD)
ROLES = ("product_owner", "business_analyst", "tech_architect", "tech_lead", "senior_engineer", "qc_engineer",
         "devops_engineer", "sandbox", "delivery")
REQUIREMENT = "requirement"
GRACE_FRACTION = Decimal("0.5")  # inject a constraint / approve partial output: half the limit again
# The largest limit of each dimension (docs/operations.md, Budgets); None (unlimited) stays the way to lift one.
MAXIMUM: dict[str, int | Decimal] = {STEPS: 100_000, TOKENS: 10_000_000_000, SANDBOX_RUNS: 100_000,
                                     COST_USD: Decimal("1000000")}
DOLLAR_PLACES = 6  # a millionth of a dollar, as LLMCall.cost_usd
MICRO = Decimal(1).scaleb(-DOLLAR_PLACES)
UNITS = {STEPS: "steps", TOKENS: "tokens", SANDBOX_RUNS: "sandbox runs", COST_USD: "dollars"}

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
    """Typed (ints, Decimal dollars) and bounded: a limit beyond its maximum is read as the maximum, dollars finer
    than a millionth rounded up to one. Raises ValueError listing every problem of shape (`shape_problems`)."""
    found = shape_problems(budget)
    if found:
        raise ValueError("; ".join(found))
    return {REQUIREMENT: _typed(budget.get(REQUIREMENT) or {}),
            "roles": {role: _typed(dims) for role, dims in (budget.get("roles") or {}).items()}}


def problems(budget: Any) -> list[str]:
    """Everything wrong with a budget someone sets (a decision's override, a project's or a promoted profile), in
    words a project admin or API client can act on: its shape, and each limit within its dimension's maximum. At
    most ECHO_MAX_NAMES of them, the rest counted (lifecycle.errors.capped)."""
    return capped(_problems(budget, bounded=True))


def shape_problems(budget: Any) -> list[str]:
    """What makes a stored budget unreadable; a limit beyond its maximum is not (it is read as the maximum)."""
    return capped(_problems(budget, bounded=False))


def _problems(budget: Any, *, bounded: bool) -> list[str]:
    if not isinstance(budget, dict):
        return ["a budget must be an object with 'requirement' and/or 'roles'"]
    found = [f"unknown key {_shown(k)}; use 'requirement' and 'roles'" for k in budget if k not in (REQUIREMENT, "roles")]
    found += _dimension_problems(REQUIREMENT, budget.get(REQUIREMENT, {}), bounded)
    roles = budget.get("roles", {})
    if not isinstance(roles, dict):
        return [*found, "roles must be an object of role → limits"]
    for role, dims in roles.items():
        if role not in ROLES:
            found.append(f"unknown role {_shown(role)}; use one of {', '.join(ROLES)}")
        found += _dimension_problems(f"roles.{role if role in ROLES else _shown(role)}", dims, bounded)
    return found


def _dimension_problems(where: str, dims: Any, bounded: bool) -> list[str]:
    if not isinstance(dims, dict):
        return [f"{where} must be an object of dimension → limit"]
    found = []
    for name, value in dims.items():
        if name not in DIMENSIONS:
            found.append(f"{where}: unknown dimension {_shown(name)}; use {', '.join(DIMENSIONS)}")
        elif value is None:
            continue
        elif (amount := _number(name, value)) is None:
            kind = "a number of dollars ≥ 0" if name == COST_USD else "a whole number ≥ 0"
            found.append(f"{where}.{name}: expected {kind} or null (unlimited), got {_shown(value)}")
        elif bounded and (excess := _beyond(name, amount)):
            found.append(f"{where}.{name}: {excess}, got {_shown(value)}")
    return found


def _number(name: str, value: Any) -> int | Decimal | None:
    """The limit `value` stands for, unbounded, or None when it is none (a bool, a negative, NaN, an object…)."""
    if isinstance(value, bool):
        return None
    if name != COST_USD:
        return value if isinstance(value, int) and value >= 0 else None
    try:  # an int straight to Decimal: str() of a huge one is refused by Python's digit limit
        amount = Decimal(value) if isinstance(value, int | Decimal) else \
            Decimal(str(value)) if isinstance(value, float | str) else None
    except InvalidOperation:
        return None
    if amount is None or not amount.is_finite() or amount < 0:
        return None
    return amount.copy_abs()  # "-0" is 0


def _beyond(name: str, amount: int | Decimal) -> str:
    """Why a limit is out of bounds: beyond the dimension's maximum, or dollars finer than a millionth; or ""."""
    if amount > MAXIMUM[name]:
        return f"at most {_plain(MAXIMUM[name])} {UNITS[name]} (null: unlimited)"
    if name == COST_USD and amount.as_tuple().exponent < -DOLLAR_PLACES and amount != amount.quantize(MICRO):
        return f"at most {DOLLAR_PLACES} decimal places (a millionth of a dollar)"
    return ""


def bound(name: str, amount: int | Decimal) -> int | Decimal:
    """Within bounds: at most the dimension's maximum; dollars rounded up to a millionth."""
    amount = min(amount, MAXIMUM[name])
    if isinstance(amount, Decimal) and amount.as_tuple().exponent < -DOLLAR_PLACES:
        amount = amount.quantize(MICRO, rounding=ROUND_CEILING)
    return amount


def _typed(dims: dict[str, Any]) -> dict[str, Any]:
    return {name: None if value is None else bound(name, _number(name, value)) for name, value in dims.items()}


def _plain(value: Any) -> str:
    return format(value, "f") if isinstance(value, Decimal) else str(value)


def _shown(value: Any) -> str:
    """A value quoted in a problem, short whatever was sent (a huge number, a long string, a nested object)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"{Decimal(value):.3E}"
    try:
        text = repr(value)
    except ValueError:  # a huge int inside: Python's digit limit
        return f"a {type(value).__name__}"
    return text if len(text) <= 40 else f"{text[:37]}…"


def grace(limit: int | Decimal, spent: int | Decimal, dimension: str | None = None) -> int | Decimal:
    """A new limit that leaves room again: what is spent plus half the old limit (at least one step, one cent);
    with its dimension, bounded (`bound`), so it is a limit `problems` accepts."""
    if isinstance(limit, Decimal) or isinstance(spent, Decimal):
        amount: int | Decimal = Decimal(spent) + max(Decimal(limit) * GRACE_FRACTION, Decimal("0.01"))
    else:
        amount = spent + max((limit + 1) // 2, 1)  # half, rounded up, in whole numbers (exact for any size)
    return bound(dimension, amount) if dimension else amount


def as_json(budget: dict[str, Any]) -> dict[str, Any]:
    """For JSON fields and API output: dollars as plain strings ("100000", never "1E+5"), so no float rounding
    creeps in."""
    def dims(values: dict[str, Any]) -> dict[str, Any]:
        return {k: _plain(v) if isinstance(v, Decimal) else v for k, v in values.items()}

    return {REQUIREMENT: dims(budget.get(REQUIREMENT, {})),
            "roles": {role: dims(values) for role, values in budget.get("roles", {}).items()}}
