"""Budget accounting and the check every step passes before it uses the model or the sandbox.

Spend is derived from the records, never kept as a counter that could drift:
- steps: Step rows claimed at least once (runs > 0), not counting steps parked by this gate;
- sandbox_runs: such steps of the sandbox kinds (self_test, qc_run);
- tokens: input + output + cache read + cache write tokens of the requirement's LLMCall rows;
- cost_usd: the cost_usd of those rows (agents/llm/pricing.py).
A role's spend is the same, restricted to its steps (Step.key → ROLE_OF_STEP) and its calls (LLMCall.role).

`budget_allows(lease)` costs one SELECT: the requirement's limits and every spend figure it needs
come back in one statement (two filtered aggregates joined to the requirement). A step claimed inline or by
step_claim has it read already, with the COMMIT of the transaction that claimed it (snapshot_at_commit). A step may start
while every dimension it uses has spent < limit, for the requirement and for its role; the step
that crosses a limit finishes (a model call is not cut off half-way), so spend can exceed a limit
by at most one step's worth.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q, QuerySet, Sum

from aiteam.db import write_behind
from lifecycle import budget_limits as bl
from lifecycle.actors import Actor
from lifecycle.errors import StaleStep
from lifecycle.models import LLMCall, Project, Requirement, Step
from lifecycle.services import steps
from lifecycle.services.outbox import emit
from lifecycle.services.transitions import transition
from lifecycle.states import BUDGET_STATES, StepState

log = logging.getLogger("aiteam.progress")
BUDGET = Actor.system("budget")
PARKED = "budget exhausted"  # the error prefix of a step this gate stopped; a decision re-queues or drops it
DROPPED = "dropped: partial output approved"  # … of a parked step whose phase output a human accepted instead
TOKENS = F("input_tokens") + F("output_tokens") + F("cache_read_tokens") + F("cache_creation_tokens")
USES = {"sandbox": (bl.STEPS, bl.SANDBOX_RUNS), "delivery": (bl.STEPS,)}
LLM_USES = (bl.STEPS, bl.TOKENS, bl.COST_USD)


@dataclass(frozen=True)
class Allowance:
    """The check's answer: truthy when the step may run, with the constraints its context must carry
    (read by the same statement, so injecting them costs the step no query)."""

    allowed: bool
    constraints: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.allowed


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
    return [kind for kind, owner in steps.ROLE_OF_STEP.items() if owner == role]


def started_steps() -> QuerySet[Step]:
    """Steps that used their resources: claimed at least once, not stopped by this gate before they ran."""
    stopped = Q(error__startswith=PARKED) | Q(error__startswith=DROPPED)
    return Step.objects.filter(runs__gt=0).exclude(Q(state=StepState.SKIPPED) & stopped)


def parked_steps(requirement: Requirement) -> QuerySet[Step]:
    return Step.objects.filter(requirement=requirement, state=StepState.SKIPPED, error__startswith=PARKED)


# --- the check: one statement ------------------------------------------------------------------
def budget_allows(lease: steps.Lease) -> Allowance:
    """Truthy when the step may run. Otherwise the step is parked and, the first time, the requirement
    escalated with a budget_exhausted review task; the caller just returns."""
    prefetched = lease.budget  # read again unless it came, holds, and found the row (the step's too, read with it)
    usable = prefetched is not None and prefetched.current and prefetched.row is not None
    row = _snapshot_row(prefetched.row) if usable else _snapshot(lease)
    if row is None:
        return Allowance(True)
    go = Allowance(True, tuple(_parsed(row["injected_constraints"]) or ()))
    if not row["budget_exhausted"] and row["state"] not in BUDGET_STATES:
        return go  # no gate outside the working states (nothing runs there in the flow)
    limits = _limits_of_json(row["playbook"], row["run_settings"], row["project__settings"], row["budget_overrides"])
    spend = _spend_of_row(row, lease.role)
    over = exhausted(limits, spend, lease.role)
    if not over and not row["budget_exhausted"]:
        return go
    try:
        budget_stop(lease=lease, over=over, limits=limits, spend=spend)
    except StaleStep as exc:
        log.warning("budget: %s", exc)
    return Allowance(False)


def _snapshot(lease: steps.Lease) -> dict[str, Any] | None:
    """The requirement's budget inputs and every spend figure, in one statement. Hand-written SQL: built by the
    ORM, this query's correlated subqueries took ~10 ms of Python to assemble and compile on every step, five
    times what the database needed to answer it. Its text depends only on the role, so it is built once."""
    with connection.cursor() as cursor:
        cursor.execute(*_snapshot_statement(lease.requirement_id, lease.key, lease.attempt))
        return _snapshot_row(cursor.fetchone())


def snapshot_at_commit(step: Step) -> write_behind.ReadAtCommit | None:
    """The snapshot for a step this transaction schedules, read with its COMMIT (no round trip of its own), for
    the worker that runs the step inline; None where it cannot be (the check then reads it at the step's
    start). It is read right after the COMMIT, and is used only if nothing has run on the connection since (an
    on-commit handler may have changed the requirement), so it holds what a read at the step's start would: a
    step's model calls are all recorded before its apply runs."""
    return write_behind.read_at_commit(*snapshot_statement(step))


def snapshot_statement(step: Step) -> tuple[str, list[Any]]:
    """The snapshot's SQL and parameters for a step (to read it together with something else)."""
    return _snapshot_statement(step.requirement_id, step.key, step.attempt)


def _snapshot_statement(requirement_id, key: str, attempt: int) -> tuple[str, list[Any]]:
    sql, template = _snapshot_sql(steps.ROLE_OF_STEP[steps.kind_of(key)])
    values = {_KEY: key, _ATTEMPT: attempt,
              _REQUIREMENT: Requirement._meta.pk.get_db_prep_value(requirement_id, connection)}
    return sql, [values.get(p, p) if isinstance(p, _Slot) else p for p in template]


def _snapshot_row(row: tuple | None) -> dict[str, Any] | None:
    """The snapshot by column name; its JSON columns as the driver returns them (text, on PostgreSQL and SQLite
    alike: Django parses JSON itself), parsed where they are used (_parsed, _limits_of_json)."""
    if row is None:
        return None
    row = dict(zip(_COLUMNS, row, strict=True))
    row["budget_exhausted"] = bool(row["budget_exhausted"])
    return row


def _parsed(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _limits_of_json(playbook: str, run_settings: Any, project_settings: Any, overrides: Any) -> dict:
    """limits_for on the snapshot's JSON text (the run's settings, else the project's: Requirement.outcome_settings),
    remembered per text: every step checks its budget, and the inputs of the limits rarely change; parsing and
    validating them again each time cost ~10-20 us of a ~1.4 ms step. The limits returned are shared: read them,
    do not change them. Invalid project budgets are therefore logged once per process and text, not every step."""
    texts = (run_settings, project_settings, overrides)
    if all(isinstance(text, str | None) for text in texts):
        return _limits_of_text(playbook, *texts)
    return _limits_of_values(playbook, *map(_parsed, texts))


@lru_cache(maxsize=256)
def _limits_of_text(playbook: str, run_settings: str | None, project_settings: str | None,
                    overrides: str | None) -> dict:
    return _limits_of_values(playbook, *map(_parsed, (run_settings, project_settings, overrides)))


def _limits_of_values(playbook: str, run_settings: Any, project_settings: Any, overrides: Any) -> dict:
    return limits_for(playbook, run_settings if run_settings is not None else project_settings, overrides)


class _Slot(str):
    """A parameter filled in per call (the step's key and attempt, the requirement) in a cached statement's parameter list."""


_KEY, _ATTEMPT, _REQUIREMENT = _Slot("key"), _Slot("attempt"), _Slot("requirement")


FIGURES = ("r_steps", "r_sandbox_runs", "o_steps", "o_sandbox_runs", "r_tokens", "r_cost_usd", "o_tokens", "o_cost_usd")
_COLUMNS = ("state", "playbook", "budget_overrides", "budget_exhausted", "injected_constraints", "run_settings",
            "project__settings", *FIGURES)  # the snapshot's select list, in order


@lru_cache(maxsize=64)
def _snapshot_sql(role: str) -> tuple[str, tuple[Any, ...]]:
    """Two aggregates, one over the requirement's steps and one over its calls, each with a FILTER per figure:
    PostgreSQL plans them in a fraction of the time eight correlated subqueries took (planning, not
    execution, was most of this statement's cost on every step)."""
    step, call = Step._meta.db_table, LLMCall._meta.db_table
    requirement, project = Requirement._meta.db_table, Project._meta.db_table
    tokens = "s.input_tokens + s.output_tokens + s.cache_read_tokens + s.cache_creation_tokens"
    sandbox_sql, role_sql = _kinds_sql(steps.SANDBOX_STEPS), _kinds_sql(role_kinds(role))
    role_sandbox = f"COUNT(*) FILTER (WHERE {sandbox_sql})" if role == "sandbox" else "0"
    steps_sql = (
        f"SELECT COUNT(*) AS r_steps, COUNT(*) FILTER (WHERE {sandbox_sql}) AS r_sandbox_runs, "
        f"COUNT(*) FILTER (WHERE {role_sql}) AS o_steps, {role_sandbox} AS o_sandbox_runs "
        f"FROM {step} s WHERE s.requirement_id = %s AND s.runs > 0 AND NOT (s.key = %s AND s.attempt = %s) "
        f"AND NOT (s.state = "
        f"'{StepState.SKIPPED}' AND (s.error LIKE '{PARKED}%%' OR s.error LIKE '{DROPPED}%%'))")
    steps_params = (_REQUIREMENT, _KEY, _ATTEMPT)  # the step itself is left out by its unique (key, attempt)
    calls_sql = (
        f"SELECT COALESCE(SUM({tokens}), 0) AS r_tokens, COALESCE(SUM(s.cost_usd), 0) AS r_cost_usd, "
        f"COALESCE(SUM({tokens}) FILTER (WHERE s.role = {_literal(role)}), 0) AS o_tokens, "
        f"COALESCE(SUM(s.cost_usd) FILTER (WHERE s.role = {_literal(role)}), 0) AS o_cost_usd "
        f"FROM {call} s WHERE s.requirement_id = %s")
    calls_params = (_REQUIREMENT,)
    figures = ", ".join(f"{table}.{name}" for table, names in (("st", FIGURES[:4]), ("ca", FIGURES[4:]))
                        for name in names)
    requirement_columns = ", ".join(f"{'p.settings' if name == 'project__settings' else 'r.' + name} AS {name}"
                                    for name in _COLUMNS[:7])
    sql = (f"SELECT {requirement_columns}, {figures} "
           f"FROM {requirement} r JOIN {project} p ON p.id = r.project_id "
           f"CROSS JOIN ({steps_sql}) st CROSS JOIN ({calls_sql}) ca WHERE r.id = %s")
    return sql, (*steps_params, *calls_params, _REQUIREMENT)



def _kinds_sql(kinds: Any) -> str:
    """Steps of these kinds ("engineer" matches "engineer:T1"), as SQL over the alias `s`. The kinds are the
    code's own names, written as literals: the statement then has four parameters to send, not thirty."""
    kinds = sorted(kinds)
    if not kinds:
        return "1 = 0"
    return "(" + " OR ".join(f"s.key = {_literal(kind)} OR s.key LIKE {_literal(kind + ':%%')}" for kind in kinds) + ")"


def _literal(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"not a step kind or role name: {name!r}")
    return f"'{name}'"


_NAME = re.compile(r"[a-z0-9_]+(:%%)?")


def _spend_of_row(row: dict[str, Any], role: str) -> dict[str, dict[str, Any]]:
    scoped = {bl.REQUIREMENT: "r_", f"role:{role}": "o_"}
    return {scope: {d: _typed(d, row[prefix + d]) for d in bl.DIMENSIONS} for scope, prefix in scoped.items()}


# --- limits and verdicts -----------------------------------------------------------------------
def limits_for(playbook: str, project_settings: dict[str, Any] | None, overrides: dict[str, Any] | None) -> dict:
    """The effective limits; a broken project layer is logged and ignored (the admin form refuses one)."""
    project = (project_settings or {}).get("budgets") or {}
    if bl.problems(project):
        log.error("project budgets are invalid, using the playbook's defaults: %s", "; ".join(bl.problems(project)))
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
            remaining = None if limit is None else max(limit - spent[dimension], 0)
            table[scope][dimension] = {"limit": _json(limit), "spent": _json(spent[dimension]),
                                       "remaining": _json(remaining)}
    return table


# --- stopping a step --------------------------------------------------------------------------
def budget_stop(*, lease: steps.Lease, over: list[Exhausted], limits: dict, spend: dict) -> None:
    """Park the step (closed as skipped, found again by its error) and, unless the requirement is paused
    already, escalate it from the state it is in with a budget_exhausted task stating spent and remaining."""
    reason = f"{PARKED}: {', '.join(map(str, over)) or 'the requirement is paused for a budget decision'}"
    with transaction.atomic():
        _, requirement = steps.lock_for_apply(lease)
        steps.step_skip(lease, reason=reason)
        log.info("step %s of %s stopped: %s", lease.key, lease.requirement_id, reason)
        if requirement.budget_exhausted or requirement.state not in BUDGET_STATES or not over:
            return
        _escalate(requirement, lease, over, standing(limits, spend))


def _escalate(requirement: Requirement, lease: steps.Lease, over: list[Exhausted], table: dict) -> None:
    from lifecycle.services.budget_gate import open_budget_task

    requirement.budget_exhausted, requirement.budget_paused_from = True, requirement.state
    transition(requirement, "exhaust_budget", actor=BUDGET,
               metadata={"step": lease.key, "attempt": lease.attempt, "exhausted": [e.to_dict() for e in over]})
    emit(requirement, "BudgetExhausted", {"step": lease.key, "exhausted": [e.to_dict() for e in over]})
    open_budget_task(requirement, lease=lease, over=over, table=table)


# --- reading spend for display and decisions ---------------------------------------------------
def spend_of(requirement: Requirement) -> dict[str, dict[str, Any]]:
    """Spend per scope: the requirement and every role that spent anything (two grouped queries)."""
    spend: dict[str, dict[str, Any]] = {bl.REQUIREMENT: dict.fromkeys(bl.DIMENSIONS, 0)}
    spend[bl.REQUIREMENT][bl.COST_USD] = Decimal(0)
    for role, tokens, cost in (LLMCall.objects.filter(requirement=requirement).order_by().values("role")
                               .annotate(t=Sum(TOKENS), c=Sum("cost_usd")).values_list("role", "t", "c")):
        _add(spend, role, {bl.TOKENS: tokens or 0, bl.COST_USD: cost or Decimal(0)})
    for key in started_steps().filter(requirement=requirement).values_list("key", flat=True):
        kind = steps.kind_of(key)
        sandbox = int(kind in steps.SANDBOX_STEPS)
        _add(spend, steps.ROLE_OF_STEP.get(kind, kind), {bl.STEPS: 1, bl.SANDBOX_RUNS: sandbox})
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
        spend.setdefault(f"role:{role}", _zero())
    return {"exhausted": requirement.budget_exhausted, "paused_from": requirement.budget_paused_from,
            "constraints": list(requirement.injected_constraints), "overrides": requirement.budget_overrides,
            "standing": standing(limits, spend)}


def _add(spend: dict, role: str, amounts: dict[str, Any]) -> None:
    scope = spend.setdefault(f"role:{role}", _zero())
    for dimension, amount in amounts.items():
        spend[bl.REQUIREMENT][dimension] += amount
        scope[dimension] += amount


def _zero() -> dict[str, Any]:
    return {**dict.fromkeys(bl.DIMENSIONS, 0), bl.COST_USD: Decimal(0)}


def _typed(dimension: str, value: Any) -> Any:
    return Decimal(value or 0) if dimension == bl.COST_USD else int(value or 0)


def _json(value: Any) -> Any:
    return str(value.quantize(Decimal("0.000001"))) if isinstance(value, Decimal) else value

