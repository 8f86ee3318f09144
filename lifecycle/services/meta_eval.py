"""The meta-evaluation log's writes (docs/meta-eval.md, ADR 40): each entry in the transaction of the fact it
records, or by the relay of the event that reports it, so an entry on record always happened.

- route: a routed fix judged by what came next, the next failure of the same source on the requirement (the same
  signature back: a misroute) or the requirement deployed without it coming back;
- gate_signal: a gate's verdict contradicted, by a human (a failed review gate approved anyway), by a later gate
  (code review passed and the quality gate failed; the quality gate passed and a human refused the deployment), or
  by an evaluation's hidden tests (lifecycle/evals/running.py);
- loops and budget_use: once when a requirement ends, keyed on it (lifecycle/services/meta_eval_end.py);
- promotion: written by the promotion code through `meta_log`.
"""
from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from lifecycle.actors import Actor
from lifecycle.failure_rules import Route, Source
from lifecycle.models import FailureRoute, MetaEvalLog, MetaKind, Organization, Project, Requirement, ReviewTask
from lifecycle.models.evals import is_evaluation_organization
from lifecycle.states import Decision, ReviewKind

# Failures whose route sends work to fix them; a step's failure is retried or asked about, no fix is routed.
JUDGED_SOURCES = (Source.SELF_TEST, Source.CODE_REVIEW, Source.QUALITY_GATE)
NO_FIX = (Route.RETRY, Route.OPERATOR)  # infrastructure: nobody was sent to fix the work
ROLE_OF_ROUTE = {Route.ENGINEER: "senior_engineer", Route.ARCHITECT: "tech_architect",
                 Route.BUSINESS_ANALYST: "business_analyst", Route.HUMAN: "human"}
# Review tasks opened only when the agents' gate refused on its last round: approving one overrides that gate.
OVERRIDABLE_GATES = {ReviewKind.CODE_REVIEW: "code_review", ReviewKind.DESIGN_REVIEW: "design_review"}
HIDDEN_TESTS, LATER_GATE, HUMAN_OVERRIDE = "hidden_tests", "later_gate", "human_override"


def meta_log(kind: str, *, organization: Organization | None, project: Project | None = None,
             requirement: Requirement | None = None, role: str = "", playbook: str = "", data: dict[str, Any],
             key: str | None = None) -> MetaEvalLog | None:
    """Append one entry in the caller's transaction. With a `key`, once only: None when it was written before."""
    entry = MetaEvalLog(kind=kind, organization=organization, project=project, requirement=requirement, role=role,
                        playbook=playbook, data=data, key=key)
    return next(iter(append([entry])), None)


def append(entries: list[MetaEvalLog]) -> list[MetaEvalLog]:
    """Insert in the caller's transaction; a keyed entry whose key was written before is left out. Returns the new."""
    # a replay re-runs a recorded requirement: its routes and decisions are a record, not the team judging again
    entries = [entry for entry in entries if not getattr(entry.requirement, "replay_of_id", None)]
    keys = [entry.key for entry in entries if entry.key is not None]
    seen = set(MetaEvalLog.objects.filter(key__in=keys).values_list("key", flat=True)) if keys else set()
    new = []
    for entry in (entry for entry in entries if entry.key is None or entry.key not in seen):
        try:
            with transaction.atomic():  # a savepoint: a concurrent writer of the same key aborts only this insert
                entry.save()
        except IntegrityError:
            if entry.key is None or not MetaEvalLog.objects.filter(key=entry.key).exists():
                raise  # not that race: a real error, not swallowed
            continue
        new.append(entry)
    return new


def entry_for(requirement: Requirement, kind: str, *, data: dict[str, Any], role: str = "",
              key: str | None = None) -> MetaEvalLog:
    """An unsaved entry about one requirement: its organization, project and playbook with it."""
    return MetaEvalLog(kind=kind, organization_id=requirement.organization_id, project_id=requirement.project_id,
                       requirement=requirement, role=role, playbook=requirement.playbook, data=data, key=key)


# --- route accuracy ---------------------------------------------------------------------------
def failure_route_judged(route: FailureRoute) -> None:
    """Inside the transaction recording `route`: it judges the route before it of the same source."""
    if route.source not in JUDGED_SOURCES:
        return
    previous = (FailureRoute.objects.filter(requirement_id=route.requirement_id, source=route.source, pk__lt=route.pk)
                .exclude(route__in=NO_FIX).order_by("-pk").first())
    if previous is not None:
        if route.signature or previous.signature:  # the failing tests or criteria named: the same ones back
            recurred = route.signature == previous.signature
        else:  # a review's or a gate's findings carry no signature: the same type of failure back
            recurred = route.rule in (previous.rule, "repeated_after_fix")
        append([_route_entry(route.requirement, previous, recurred=recurred,
                             judged_by=f"next failure ({route.rule})")])


def _route_entry(requirement: Requirement, route: FailureRoute, *, recurred: bool, judged_by: str) -> MetaEvalLog:
    data = {"failure_route": route.pk, "source": route.source, "failure_kind": f"{route.source}:{route.rule}",
            "routed_to": route.route, "recurred": recurred, "signature": route.signature, "judged_by": judged_by}
    return entry_for(requirement, MetaKind.ROUTE, role=ROLE_OF_ROUTE.get(Route(route.route), route.route), data=data,
                     key=f"route:{route.pk}")


def routes_held(requirement: Requirement) -> list[MetaEvalLog]:
    """Deployed: each source's last routed fix held (the failure did not come back); earlier ones were judged."""
    last: dict[str, FailureRoute] = {}
    for route in (FailureRoute.objects.filter(requirement=requirement, source__in=JUDGED_SOURCES)
                  .exclude(route__in=NO_FIX).order_by("pk")):
        last[route.source] = route
    return [_route_entry(requirement, route, recurred=False, judged_by="deployed") for route in last.values()]


# --- gate signals -----------------------------------------------------------------------------
def gate_contradicted(requirement: Requirement, *, gate: str, verdict: str, by: str, **facts: Any) -> None:
    """A gate's verdict that later evidence contradicts: `by` is hidden_tests, later_gate or human_override."""
    append([entry_for(requirement, MetaKind.GATE_SIGNAL,
                      data={"gate": gate, "verdict": verdict, "contradicted_by": by, **facts})])


def review_decision_logged(task: ReviewTask, actor: Actor) -> None:
    """Inside review_decide's transaction: a person approving what a review gate refused, or refusing a
    deployment the quality gate passed."""
    requirement = task.requirement
    if not actor.is_human or is_evaluation_organization(requirement.organization.slug):
        return  # a policy's decision (SLA, autonomy, the evaluation policy) contradicts no gate
    if task.kind in OVERRIDABLE_GATES and task.decision == Decision.APPROVE:
        gate_contradicted(requirement, gate=OVERRIDABLE_GATES[task.kind], verdict="fail", by=HUMAN_OVERRIDE,
                          review_task=str(task.pk), round=task.round, decided_via=task.decided_via)
    elif task.kind == ReviewKind.DEPLOYMENT_APPROVAL and task.decision == Decision.REJECT:
        gate_contradicted(requirement, gate="quality", verdict="pass", by=LATER_GATE, later_gate=task.kind,
                          review_task=str(task.pk), round=task.round, decided_by=actor.role or "human")


def quality_gate_failed(requirement: Requirement, *, rule: str) -> None:
    """Inside the quality gate's failure route: the code review that let this code through passed it; not when a
    person approved the code over the review's refusal (that is the override's entry, and the gate was right)."""
    overridden = requirement.review_tasks.filter(kind=ReviewKind.CODE_REVIEW, round=requirement.code_review_round,
                                                 decision=Decision.APPROVE, decided_by__isnull=False).exists()
    if overridden:
        return
    gate_contradicted(requirement, gate="code_review", verdict="pass", by=LATER_GATE, later_gate="quality",
                      rule=rule, round=requirement.code_review_round)
