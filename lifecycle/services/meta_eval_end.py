"""A requirement's end in the meta-evaluation log (docs/meta-eval.md): the loops it went round and its budget use
per role, once per requirement (keyed on it), and, when it deployed, the routed fixes that held."""
from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

from django.db import OperationalError, transaction

from lifecycle import budget_limits as bl
from lifecycle.evals import measures
from lifecycle.models import MetaEvalLog, MetaKind, OutboxEvent, Requirement
from lifecycle.services.budgets import limits_for, spend_of, zero_spend
from lifecycle.services.meta_eval import append, entry_for, routes_held
from lifecycle.states import RequirementState

log = logging.getLogger("aiteam.progress")


def requirement_ended(event: OutboxEvent) -> None:
    """Deployed or cancelled (an outbox handler): loops and budget use, once per requirement (keyed), and the
    routed fixes that held. In a savepoint: a measure is never worth holding back the event's other handlers."""
    requirement = Requirement.objects.get(pk=event.requirement_id)
    if requirement.replay_of_id:  # a replay re-runs recorded answers: its source was measured
        return
    try:
        with transaction.atomic():
            held = routes_held(requirement) if requirement.state == RequirementState.DEPLOYED else []
            append([_loops(requirement), *_budget_use(requirement), *held])
    except OperationalError:
        raise  # the database, not the data: the relay tries the event again
    except Exception:
        log.exception("no meta-evaluation entries for requirement %s (outbox event %s)", requirement.pk, event.pk)


def _loops(requirement: Requirement) -> MetaEvalLog:
    return entry_for(requirement, MetaKind.LOOPS, data={**measures.loops(requirement), "state": requirement.state},
                     key=f"loops:r{requirement.pk}")


def _budget_use(requirement: Requirement) -> list[MetaEvalLog]:
    """Per role (and the requirement as a whole, role ""): spend against the allocation the playbook and project
    gave it, before any human override, so an overrun reads above 1."""
    limits = limits_for(requirement.playbook, requirement.outcome_settings, None)
    spend = spend_of(requirement)
    for role in limits["roles"]:
        spend.setdefault(f"role:{role}", zero_spend())
    overridden, entries = bool(requirement.budget_overrides), []
    for scope, spent in spend.items():
        role = scope.partition(":")[2] if scope != bl.REQUIREMENT else ""
        dimensions = {d: _cell(spent[d], bl.limit_of(limits, scope, d)) for d in bl.DIMENSIONS}
        uses = [cell["use"] for cell in dimensions.values() if cell["use"] is not None]
        entries.append(entry_for(
            requirement, MetaKind.BUDGET_USE, role=role, key=f"budget:r{requirement.pk}:{role or bl.REQUIREMENT}",
            data={"scope": scope, "use": max(uses) if uses else None, "dimensions": dimensions,
                  "overridden": overridden, "state": requirement.state}))
    return entries


def _cell(spent: Any, limit: Any) -> dict[str, Any]:
    """Spent and limit as JSON numbers; use = spent / limit (None when unlimited, or a zero limit)."""
    use = round(float(spent) / float(limit), 4) if limit else None
    as_json = (lambda v: None if v is None else float(v) if isinstance(v, Decimal) else v)
    return {"spent": as_json(spent), "limit": as_json(limit), "use": use}
