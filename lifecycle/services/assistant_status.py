"""What the status reporter reads (ADR 36): the requirements in flight and what each waits on, one requirement's
blockers, its spend against its budgets, and the PM's digest. Computed from the records, as short text; the
organization is the asker's and a requirement is one the caller found within it (assistant_tools.Scope).
"""
from __future__ import annotations

from typing import Any

from django.db.models import Max, Q
from django.utils import timezone

from lifecycle import budget_limits as bl
from lifecycle.models import Requirement, ReviewTask, Step
from lifecycle.services.assistant_failures import clip
from lifecycle.services.budgets import budget_report, cell_text, parked_steps
from lifecycle.services.digest import digest_facts
from lifecycle.states import NON_TERMINAL_STATES, StepState

IN_FLIGHT_SHOWN = 25
ACTIVE = (StepState.QUEUED, StepState.RUNNING)


def requirements_in_flight(organization_id: Any) -> str:
    """Every unfinished requirement (the oldest first): its state, how long it has been in it, what it waits on."""
    rows = list(Requirement.objects.filter(organization_id=organization_id, state__in=NON_TERMINAL_STATES)
                .annotate(since=Max("transitions__created_at", filter=Q(transitions__subject="requirement")))
                .order_by("created_at")[:IN_FLIGHT_SHOWN + 1])
    if not rows:
        return "no requirement is in flight in this organization"
    waits = _waits_on([r.pk for r in rows[:IN_FLIGHT_SHOWN]])
    lines = [f"requirement {r.pk} '{clip(r, 80)}': {r.state} for {ago(r.since or r.created_at)}; waits on: "
             f"{'; '.join(waits.get(r.pk, [])) or ('the budget' if r.budget_exhausted else 'nothing recorded')}"
             for r in rows[:IN_FLIGHT_SHOWN]]
    if len(rows) > IN_FLIGHT_SHOWN:
        lines.append(f"(the oldest {IN_FLIGHT_SHOWN} shown; more are in flight)")
    return "\n".join(lines)


def _waits_on(ids: list[Any]) -> dict[Any, list[str]]:
    """Per requirement: the review tasks waiting for a person, then the steps queued or running (two queries)."""
    now, waits = timezone.now(), {}
    for pk, kind, due in (ReviewTask.objects.pending().filter(requirement_id__in=ids)
                          .values_list("requirement_id", "kind", "sla_deadline")):
        waits.setdefault(pk, []).append(f"a person to decide {kind}{' (OVERDUE)' if due < now else ''}")
    for pk, key, state in (Step.objects.filter(requirement_id__in=ids, state__in=ACTIVE)
                           .values_list("requirement_id", "key", "state")):
        waits.setdefault(pk, []).append(f"step {key} ({state})")
    return waits


def requirement_blockers(requirement: Requirement) -> str:
    """What stops the requirement now: review tasks waiting (with their SLA), the budget, failed steps not yet
    run again; and the steps under way."""
    now = timezone.now()
    lines = [f"'{requirement}' is {requirement.state}"]
    for task in requirement.review_tasks.pending().select_related("assignee"):
        late = "OVERDUE since" if task.sla_deadline < now else "due"
        lines.append(f"blocked by review task {task.pk} ({task.kind} round {task.round}, {task.state}, {late} "
                     f"{task.sla_deadline:%Y-%m-%d %H:%M} UTC, assignee {task.assignee or 'none'}): {clip(task.question, 200)}")
    if requirement.budget_exhausted:
        parked = ", ".join(parked_steps(requirement).values_list("key", flat=True)) or "none"
        lines.append(f"blocked by its budget: exhausted, paused from {requirement.budget_paused_from}; steps parked: {parked}")
    for step in Step.objects.filter(requirement=requirement, state=StepState.FAILED).order_by("-id")[:5]:
        lines.append(f"failed step {step.key}#{step.attempt}: {clip(step.error, 200)}")
    active = [f"{key} ({state})" for key, state in Step.objects.filter(requirement=requirement, state__in=ACTIVE)
              .values_list("key", "state")]
    if len(lines) == 1:
        lines.append("nothing blocks it")
    lines.append(f"under way: {', '.join(active) or 'no step queued or running'}")
    return "\n".join(lines)


def requirement_spend(requirement: Requirement) -> str:
    """Spent, limit and remaining per dimension, for the requirement and each role that spent anything."""
    report = budget_report(requirement)
    lines = [f"spend of '{requirement}' (spent / limit):"]
    if report["exhausted"]:
        lines.append(f"the budget is EXHAUSTED; the requirement is paused from {report['paused_from']}")
    idle = []
    for scope, cells in report["standing"].items():
        if scope != bl.REQUIREMENT and not any(cell["spent"] for cell in cells.values()):
            idle.append(scope.removeprefix("role:"))
            continue
        lines.append(f"{scope}: " + "; ".join(f"{dimension} {cell_text(cell)}" for dimension, cell in cells.items()))
    if idle:
        lines.append(f"roles that spent nothing yet: {', '.join(idle)}")
    if report["overrides"]:
        lines.append(f"limits raised by a person: {report['overrides']}")
    lines += [f"constraint added by a person: {clip(c, 200)}" for c in report["constraints"]]
    return "\n".join(lines)


def status_digest(requirement: Requirement) -> str:
    """The project manager's digest, computed now from the records (the stored one is refreshed on events)."""
    facts = digest_facts(requirement)
    lines = [f"digest of '{requirement}': {facts['headline']}",
             f"state {facts['state']} for {duration(facts['time_in_state_s'])}"]
    lines += [f"blocker: {b['kind']}{' (OVERDUE)' if b['overdue'] else ''}: {clip(b['question'], 200)}"
              for b in facts["blockers"]]
    loops = ", ".join(f"{name.replace('_', ' ')} {count}" for name, count in facts["loops"].items())
    lines.append(f"escalations {facts['escalations']}; {loops}")
    lines += [f"model spend of {role}: {s['calls']} calls, {s['input_tokens']} input and {s['output_tokens']} output "
              f"tokens, ${s['cost_usd']:.4f}" for role, s in facts["llm_spend"].items()]
    return "\n".join(lines)


def ago(when) -> str:
    return duration((timezone.now() - when).total_seconds())


def duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 1440} d {minutes % 1440 // 60} h" if minutes >= 1440 else f"{minutes // 60} h {minutes % 60} min"
