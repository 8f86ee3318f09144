"""The dashboard's numbers. Each function is one query (aggregated in the database where SQL allows it),
so the page costs the same number of queries with ten tasks or a million."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import (
    Avg,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Window,
)
from django.db.models.functions import RowNumber, TruncDate

from lifecycle.models import LLMCall, Membership, Requirement, ReviewTask, StateTransition
from lifecycle.states import SLA_POLICY_ROLE, RequirementState, ReviewState

AGE_BUCKETS = [("< 1 h", 0, 1), ("1–4 h", 1, 4), ("4–24 h", 4, 24), ("1–3 d", 24, 72), ("> 3 d", 72, None)]


@dataclass(frozen=True)
class Scope:
    """The organizations a staff member sees; None for a superuser (all of them)."""

    organization_ids: list[Any] | None

    @classmethod
    def of(cls, user: Any) -> Scope:
        if user.is_superuser:
            return cls(None)
        return cls(list(Membership.objects.filter(user=user).values_list("organization_id", flat=True)))

    def filter(self, rows: QuerySet, path: str = "organization") -> QuerySet:
        return rows if self.organization_ids is None else rows.filter(**{f"{path}_id__in": self.organization_ids})


def requirements_by_state(scope: Scope) -> list[tuple[str, int]]:
    counts = dict(scope.filter(Requirement.objects.all()).values_list("state").annotate(n=Count("pk")).order_by())
    return [(state.label, counts.get(state.value, 0)) for state in RequirementState]


def activity_per_day(scope: Scope, since: datetime) -> dict[Any, dict[str, int]]:
    """Per day: briefs submitted, requirements deployed, review decisions, escalations (tasks and requirements)."""
    rows = (scope.filter(StateTransition.objects.filter(created_at__gte=since), "requirement__organization")
            .annotate(day=TruncDate("created_at")).values("day").order_by("day").annotate(
                submitted=Count("pk", filter=Q(subject="requirement", event="submit")),
                deployed=Count("pk", filter=Q(subject="requirement", to_state=RequirementState.DEPLOYED)),
                decided=Count("pk", filter=Q(subject="review_task", event="resolve")),
                escalations=Count("pk", filter=Q(event="escalate")),
            ))
    return {row.pop("day"): row for row in rows}


def median_hours_in_state(scope: Scope, since: datetime) -> list[tuple[str, float, int]]:
    """Median hours a requirement spent in each state it left since `since` (state, median, how many stays).

    Ranked in the database: each stay's end is the requirement's next transition, the stays of a state are
    numbered by length, and only the one or two middle stays of each state come back."""
    transitions = scope.filter(StateTransition.objects.filter(subject="requirement", created_at__gte=since),
                               "requirement__organization")
    next_one = transitions.filter(requirement_id=OuterRef("requirement_id"), pk__gt=OuterRef("pk")).order_by("pk")
    stays = transitions.annotate(left_at=Subquery(next_one.values("created_at")[:1])).filter(left_at__isnull=False)
    stays = stays.annotate(
        length=ExpressionWrapper(F("left_at") - F("created_at"), output_field=DurationField()),
        n=Window(Count("pk"), partition_by=[F("to_state")]),
        rank=Window(RowNumber(), partition_by=[F("to_state")], order_by=[F("length").asc(), F("pk").asc()]),
    )
    middle = stays.filter(Q(rank=(F("n") + 1) / 2) | Q(rank=(F("n") + 2) / 2)).values_list("to_state", "length", "n")
    found: dict[str, tuple[list[float], int]] = {}
    for state, length, n in middle:
        found.setdefault(state, ([], n))[0].append(length.total_seconds() / 3600)
    order = {s.value: i for i, s in enumerate(RequirementState)}
    return [(RequirementState(s).label, statistics.fmean(hours), n)
            for s, (hours, n) in sorted(found.items(), key=lambda kv: order.get(kv[0], 99))]


def open_tasks_by_age(scope: Scope, now: datetime) -> list[tuple[str, int, int]]:
    """(age bucket, within SLA, SLA breached) for pending review tasks, in one aggregate query."""
    aggregates = {}
    for i, (_, low, high) in enumerate(AGE_BUCKETS):
        age = Q(created_at__lte=now - timedelta(hours=low))
        if high is not None:
            age &= Q(created_at__gt=now - timedelta(hours=high))
        aggregates[f"ok{i}"] = Count("pk", filter=age & Q(sla_deadline__gte=now))
        aggregates[f"late{i}"] = Count("pk", filter=age & Q(sla_deadline__lt=now))
    counts = scope.filter(ReviewTask.objects.pending().of_real_runs()).aggregate(**aggregates)
    return [(label, counts[f"ok{i}"], counts[f"late{i}"]) for i, (label, _, _) in enumerate(AGE_BUCKETS)]


def review_kpis(scope: Scope, now: datetime, since: datetime) -> dict[str, int]:
    """Review work of real runs: a replay's gates (decided as recorded, or held as a record) are nobody's."""
    return scope.filter(ReviewTask.objects.of_real_runs()).aggregate(
        open=Count("pk", filter=Q(state__in=[ReviewState.OPEN, ReviewState.CLAIMED, ReviewState.ESCALATED])),
        overdue=Count("pk", filter=Q(state__in=[ReviewState.OPEN, ReviewState.CLAIMED, ReviewState.ESCALATED],
                                     sla_deadline__lt=now)),
        escalated=Count("pk", filter=Q(state=ReviewState.ESCALATED)),
        by_policy=Count("pk", filter=Q(decided_at__gte=since, decided_by_policy=SLA_POLICY_ROLE)),  # SLA timeouts
        automatic=Count("pk", filter=Q(decided_at__gte=since) & ~Q(decided_by_policy__in=["", SLA_POLICY_ROLE])),
        decided=Count("pk", filter=Q(decided_at__gte=since)),
    )


def oldest_overdue(scope: Scope, now: datetime, limit: int = 10) -> list[ReviewTask]:
    rows = scope.filter(ReviewTask.objects.overdue(now).of_real_runs()).select_related(
        "requirement__project__organization", "assignee")
    return list(rows.order_by("sla_deadline")[:limit])


def loop_counts(scope: Scope) -> dict[str, Any]:
    return scope.filter(Requirement.objects.all()).aggregate(
        requirements=Count("pk"), dev_attempts_avg=Avg("dev_attempts"), dev_attempts_max=Max("dev_attempts"),
        story_rounds_avg=Avg("story_round"), design_rounds_avg=Avg("design_round"),
        code_review_rounds_avg=Avg("code_review_round"), review_rounds_max=Max("code_review_round"),
    )


def histogram(scope: Scope, field: str) -> list[tuple[str, int]]:
    counts = scope.filter(Requirement.objects.all()).values_list(field).annotate(n=Count("pk")).order_by(field)
    return [(str(value), n) for value, n in counts]


def llm_calls(scope: Scope) -> QuerySet:
    """The model calls that were paid for. A replay's calls (its requirement has `replay_of`) carry the usage and
    cost its source's calls recorded, so counting them would count that spend twice: every LLM figure of the
    dashboard (per role, per requirement, the totals and the cost and cache charts) leaves them out."""
    return scope.filter(LLMCall.objects.filter(requirement__replay_of=None), "requirement__organization")


def llm_by_role(scope: Scope) -> list[dict[str, Any]]:
    rows = llm_calls(scope).values("role").annotate(
        calls=Count("pk"), input=Sum("input_tokens"), output=Sum("output_tokens"), cache_read=Sum("cache_read_tokens"),
        cache_write=Sum("cache_creation_tokens"), cost=Sum("cost_usd"),
    ).order_by("-cost", "role")
    return [{**row, "cache_hit_rate": cache_hit_rate(row)} for row in rows]


def llm_by_requirement(scope: Scope, limit: int = 10) -> list[dict[str, Any]]:
    rows = llm_calls(scope).exclude(requirement=None).values(
        "requirement_id", "requirement__title", "requirement__brief").annotate(
        tokens=Sum(F("input_tokens") + F("output_tokens") + F("cache_read_tokens") + F("cache_creation_tokens")),
        cost=Sum("cost_usd"), calls=Count("pk"),
    ).order_by("-cost", "-tokens")[:limit]
    return [{**row, "title": row["requirement__title"] or row["requirement__brief"][:60]} for row in rows]


def cache_hit_rate(row: dict[str, Any]) -> float | None:
    """Share of prompt tokens read from the cache (Anthropic counts input, cache reads and cache writes apart)."""
    prompt = (row.get("input") or 0) + (row.get("cache_read") or 0) + (row.get("cache_write") or 0)
    return (row.get("cache_read") or 0) / prompt if prompt else None


def llm_totals(by_role: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("calls", "input", "output", "cache_read", "cache_write")
    totals: dict[str, Any] = {k: sum(r[k] or 0 for r in by_role) for k in keys}
    totals["cost"] = sum((r["cost"] or Decimal(0) for r in by_role), Decimal(0))
    totals["cache_hit_rate"] = cache_hit_rate(totals)
    return totals
