"""The budget gate: the check every step passes before it uses the model or the sandbox, the review task a spent
budget opens, and its four options.

Options (ReviewTask decisions, decided through review_decide like every gate):
- override_budget: new limits (`budget`, same shape as a project's) laid over the requirement's; they must
  leave room in every dimension the parked steps use, else 400. The parked steps run again.
- inject_constraint: the `constraint` text is stored on the requirement and put in every later agent
  context; the exhausted dimensions get a grace (spent + half the limit) and the parked steps run again.
- approve (approve partial output): the phase's output so far is accepted in place of the parked step,
  with the same grace for what follows (PARTIAL below says what that means per step); offered only when
  the parked step has such an output.
- reject (terminate): the requirement is cancelled (outcomes.apply); the parked steps stay skipped.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from lifecycle import budget_limits as bl
from lifecycle import step_keys
from lifecycle.actors import Actor
from lifecycle.errors import DomainError, StaleStep
from lifecycle.models import Requirement, ReviewTask, Step
from lifecycle.services import budgets, leases, reviews, scheduling
from lifecycle.services.design import spec_approve
from lifecycle.services.development import code_review_pass
from lifecycle.services.outbox import emit
from lifecycle.services.transitions import transition
from lifecycle.states import BUDGET_STATES, Decision, ReviewKind, StepState

log = logging.getLogger("aiteam.progress")
BUDGET = Actor.system("budget")
# What "approve partial output" accepts, by the kind of the parked step.
PARTIAL = {
    step_keys.ENGINEER: "the plan tasks finished so far stand; the unfinished ones are dropped and the self-tests run "
                    "on the code as it is (then the usual fix / 3-attempt rules apply)",
    step_keys.FIX: "the fix is dropped and the self-tests run on the code as it is",
    step_keys.DESIGN_REVIEW: "the latest technical spec is approved as it is (design_ready, then the plan)",
    step_keys.CODE_REVIEW: "the code is approved as it is (test_pending, then the quality gate)",
}


@dataclass(frozen=True)
class Allowance:
    """The check's answer: truthy when the step may run, with the constraints its context must carry
    (read by the same statement, so injecting them costs the step no query)."""

    allowed: bool
    constraints: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.allowed


# --- the check ---------------------------------------------------------------------------------
def budget_admit_or_park(lease: leases.Lease) -> Allowance:
    """Truthy when the step may run. Otherwise the step is parked and, the first time, the requirement
    escalated with a budget_exhausted review task; the caller just returns."""
    requirement = Requirement.objects.select_related("project").filter(pk=lease.requirement_id).first()
    if requirement is None:
        return Allowance(True)
    go = Allowance(True, tuple(requirement.injected_constraints or ()))
    if not requirement.budget_exhausted and requirement.state not in BUDGET_STATES:
        return go  # no gate outside the working states (nothing runs there in the flow)
    limits = budgets.limits_for(requirement.playbook, requirement.outcome_settings, requirement.budget_overrides)
    spend = budgets.spend_of(requirement, besides=lease)
    spend.setdefault(f"role:{lease.role}", budgets.zero_spend())
    over = budgets.exhausted(limits, spend, lease.role)
    if not over and not requirement.budget_exhausted:
        return go
    try:
        budget_stop(lease=lease, over=over, limits=limits, spend=spend)
    except StaleStep as exc:
        log.warning("budget: %s", exc)
    return Allowance(False)


# --- stopping a step --------------------------------------------------------------------------
def budget_stop(*, lease: leases.Lease, over: list[budgets.Exhausted], limits: dict, spend: dict) -> None:
    """Park the step (closed as skipped, found again by its error) and, unless the requirement is paused
    already, escalate it from the state it is in with a budget_exhausted task stating spent and remaining."""
    reason = f"{budgets.PARKED}: {', '.join(map(str, over)) or 'the requirement is paused for a budget decision'}"
    with transaction.atomic():
        _, requirement = leases.lock_for_apply(lease)
        leases.step_skip(lease, reason=reason)
        log.info("step %s of %s stopped: %s", lease.key, lease.requirement_id, reason)
        if requirement.budget_exhausted or requirement.state not in BUDGET_STATES or not over:
            return
        _escalate(requirement, lease, over, budgets.standing(limits, spend))


def _escalate(requirement: Requirement, lease: leases.Lease, over: list[budgets.Exhausted], table: dict) -> None:
    requirement.budget_exhausted, requirement.budget_paused_from = True, requirement.state
    transition(requirement, "exhaust_budget", actor=BUDGET,
               metadata={"step": lease.key, "attempt": lease.attempt, "exhausted": [e.to_dict() for e in over]})
    emit(requirement, "BudgetExhausted", {"step": lease.key, "exhausted": [e.to_dict() for e in over]})
    open_budget_task(requirement, lease=lease, over=over, table=table)


def open_budget_task(requirement: Requirement, *, lease: leases.Lease, over: list, table: dict) -> ReviewTask:
    """Inside the stop's transaction: the question, what was spent and what remains, and the options."""
    partial = PARTIAL.get(lease.kind, "")
    task = reviews.review_open(
        requirement, kind=ReviewKind.BUDGET_EXHAUSTED, resume_target=lease.key,
        question=f"The {lease.role.replace('_', ' ')} ran out of budget before step '{lease.key}' "
        f"({', '.join(map(str, over))}). Override the budget with new limits, inject a constraint and continue, "
        f"{'approve the partial output, ' if partial else ''}or terminate (reject with a reason).",
        reasoning=f"The requirement paused in '{requirement.budget_paused_from}'; it resumes there.",
        context={"step_id": lease.step_id, "step": lease.key, "role": lease.role,
                 "paused_from": requirement.budget_paused_from, "exhausted": [e.to_dict() for e in over],
                 "budget": table, "partial_output": partial, "suggested_override": _suggestion(over)},
    )
    if not partial:
        task.options = [o for o in task.options if o != Decision.APPROVE]
        task.save(update_fields=["options"])
    return task


def _suggestion(over: list) -> dict[str, Any]:
    """Double each exhausted limit (at least spent + one unit, at most the maximum): a starting point for the
    reviewer's override."""
    budget: dict[str, Any] = {bl.REQUIREMENT: {}, "roles": {}}
    for item in over:
        doubled = bl.bound(item.dimension, max(item.limit * 2, bl.grace(item.limit, item.spent)))
        scope = budget[bl.REQUIREMENT] if item.scope == bl.REQUIREMENT else budget["roles"].setdefault(
            item.scope.partition(":")[2], {})
        scope[item.dimension] = doubled
    return bl.as_json(budget)


# --- the options -------------------------------------------------------------------------------
def budget_decision_apply(task: ReviewTask, requirement: Requirement, *, actor: Actor) -> None:
    """Called by outcomes inside review_decide's transaction (reject never gets here: it cancels)."""
    if task.decision == Decision.OVERRIDE_BUDGET:
        _lay_over(requirement, bl.normalize(task.decision_data["budget"]))
        _ensure_room(requirement)
    elif task.decision == Decision.INJECT_CONSTRAINT:
        requirement.injected_constraints = [*requirement.injected_constraints, task.feedback]
        _lay_over(requirement, budget_grace(requirement, task))
    else:
        _lay_over(requirement, budget_grace(requirement, task))
    _resume(requirement, actor=actor, task=task)
    if task.decision == Decision.APPROVE:
        _accept_partial(requirement, actor=actor)
    else:
        _rerun_parked(requirement)


def _lay_over(requirement: Requirement, budget: dict[str, Any]) -> None:
    current = bl.normalize(requirement.budget_overrides or {})
    requirement.budget_overrides = bl.as_json(bl.merge(current, budget))
    requirement.save(update_fields=["budget_overrides", "injected_constraints"])


def budget_grace(requirement: Requirement, task: ReviewTask) -> dict[str, Any]:
    """Room again in every dimension that ran out: what is spent now plus half its limit, at most its maximum (so
    the autonomous policy's override passes the same validation as a person's)."""
    limits, spend = _standing(requirement)
    budget: dict[str, Any] = {bl.REQUIREMENT: {}, "roles": {}}
    for item in task.context.get("exhausted", []):
        scope, dimension = item["scope"], item["dimension"]
        limit = bl.limit_of(limits, scope, dimension)
        if limit is None:
            continue
        spent = spend.get(scope, {}).get(dimension, 0)
        target = budget[bl.REQUIREMENT] if scope == bl.REQUIREMENT else budget["roles"].setdefault(
            scope.partition(":")[2], {})
        target[dimension] = bl.grace(limit, spent, dimension) if spent >= limit else limit
    return budget


def _ensure_room(requirement: Requirement) -> None:
    limits, spend = _standing(requirement)
    parked = budgets.parked_steps(requirement).values_list("key", flat=True)
    roles = {step_keys.ROLE_OF_STEP[step_keys.kind_of(key)] for key in parked}
    still = [e for role in sorted(roles) for e in budgets.exhausted(limits, _with_role(spend, role), role)]
    if still:
        raise DomainError("the new limits leave no room: " + ", ".join(map(str, still)), "budget")


def _standing(requirement: Requirement) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    limits = budgets.limits_for(requirement.playbook, requirement.outcome_settings, requirement.budget_overrides)
    return limits, budgets.spend_of(requirement)


def _with_role(spend: dict[str, dict[str, Any]], role: str) -> dict[str, dict[str, Any]]:
    return {**spend, f"role:{role}": spend.get(f"role:{role}") or {**dict.fromkeys(bl.DIMENSIONS, 0)}}


def _resume(requirement: Requirement, *, actor: Actor, task: ReviewTask) -> None:
    requirement.budget_exhausted = False
    back_to = requirement.budget_paused_from
    transition(requirement, "resume_budget", actor=actor, metadata={"decision": task.decision, "to": back_to,
                                                                  "overrides": requirement.budget_overrides})
    requirement.budget_paused_from = ""
    requirement.save(update_fields=["budget_paused_from"])


def _rerun_parked(requirement: Requirement) -> None:
    for step in budgets.parked_steps(requirement).select_for_update():
        leases.step_retry_by_human(step)


def _drop_siblings_in_flight(requirement: Requirement, *, attempt: int) -> None:
    """The partial output is what is finished now: plan tasks still queued or running stop (a running one's
    late write is refused by its fence), so the self-tests see the code they accept and nothing lands after."""
    in_flight = Step.objects.filter(requirement=requirement, attempt=attempt, key__startswith=f"{step_keys.ENGINEER}:",
                                    state__in=[StepState.QUEUED, StepState.RUNNING])
    in_flight.update(state=StepState.SKIPPED, error=f"{budgets.DROPPED} (still in flight)", lease_expires_at=None,
                     finished_at=timezone.now())


def _accept_partial(requirement: Requirement, *, actor: Actor) -> None:
    for step in list(budgets.parked_steps(requirement).select_for_update()):
        kind = step_keys.kind_of(step.key)
        if kind not in PARTIAL:
            leases.step_retry_by_human(step)  # parked later, in another phase: it simply runs
            continue
        Step.objects.filter(pk=step.pk).update(error=f"{budgets.DROPPED} ({step.error})"[:4000])
        if kind in (step_keys.ENGINEER, step_keys.FIX):
            _drop_siblings_in_flight(requirement, attempt=step.attempt)
            scheduling.step_schedule(requirement_id=requirement.pk, key=step_keys.SELF_TEST, attempt=step.attempt)
        elif kind == step_keys.DESIGN_REVIEW:
            spec_approve(requirement, actor=actor)
        elif kind == step_keys.CODE_REVIEW:
            code_review_pass(requirement, actor=actor)
