"""The meta-evaluation log's aggregates with their trends (docs/meta-eval.md): one query per measure, grouped by
period in the database, whatever the number of entries (the budget medians read one number per entry).

Every trend is a list aligned with `periods`, oldest first; a share or a mean is None where the period has no entry.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import cached_property
from typing import Any

from django.db.models import Avg, Count, FloatField, Q, QuerySet
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, TruncDate, TruncWeek
from django.utils import timezone

from lifecycle.models import MetaEvalLog, MetaKind

PERIODS = {"week": (TruncWeek, 7), "day": (TruncDate, 1)}
MAX_PERIODS = {"week": 52, "day": 90}
DEFAULT_PERIODS = {"week": 12, "day": 14}
LOOP_MEASURES = ("dev_attempts", "code_review_rounds", "qc_rounds", "story_rounds", "design_rounds")
FALSE_PASS = ("hidden_tests", "later_gate")  # a gate passed what later evidence failed
OVERRIDDEN_FAIL = "human_override"  # a gate failed what a person approved
ACCEPTED, DECIDED = ("accepted", "modified"), ("accepted", "modified", "rejected")


@dataclass(frozen=True)
class Window:
    """The last `count` periods (ISO weeks from Monday, or days), this one included, of the entries in `scope`."""

    period: str
    count: int
    organization_ids: list[Any] | None  # None: every organization's entries, and those of none
    project_id: Any = None

    @cached_property
    def starts(self) -> list[date]:
        today = timezone.localdate()
        this = today - timedelta(days=today.weekday()) if self.period == "week" else today
        step = PERIODS[self.period][1]
        return [this - timedelta(days=step * i) for i in reversed(range(self.count))]

    def labels(self) -> list[str]:
        if self.period == "week":
            return [f"{d.isocalendar().year}-W{d.isocalendar().week:02d}" for d in self.starts]
        return [d.isoformat() for d in self.starts]

    def entries(self, kind: str) -> QuerySet:
        start = timezone.make_aware(datetime.combine(self.starts[0], datetime.min.time()))
        rows = MetaEvalLog.objects.filter(kind=kind, created_at__gte=start)
        if self.organization_ids is not None:
            rows = rows.filter(organization_id__in=self.organization_ids)
        if self.project_id is not None:
            rows = rows.filter(project_id=self.project_id)
        return rows.annotate(p=PERIODS[self.period][0]("created_at")).order_by()

    @cached_property
    def _positions(self) -> dict[date, int]:
        return {start: i for i, start in enumerate(self.starts)}

    def index(self, value: date | datetime) -> int | None:
        """The position of a period's start among `starts` (None: outside the window)."""
        return self._positions.get(value.date() if isinstance(value, datetime) else value)


def summary(window: Window) -> dict[str, Any]:
    return {"period": window.period, "periods": window.labels(), "route_accuracy": route_accuracy(window),
            "budget_use": budget_use(window), "gate_signal": gate_signal(window), "loops": loops(window),
            "promotion": promotions(window)}


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def route_accuracy(window: Window) -> dict[str, Any]:
    """The share of routed fixes the same failure did not follow, per period and per role routed to."""
    rows = window.entries(MetaKind.ROUTE).values("p", "role").annotate(
        n=Count("pk"), recurred=Count("pk", filter=Q(data__recurred=True)))
    routed, recurred = [0] * window.count, [0] * window.count
    by_role: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        if (i := window.index(row["p"])) is not None:
            routed[i] += row["n"]
            recurred[i] += row["recurred"]
            by_role[row["role"]][0] += row["n"]
            by_role[row["role"]][1] += row["recurred"]
    return {"routed": sum(routed), "recurred": sum(recurred), "accuracy": _share(sum(routed) - sum(recurred), sum(routed)),
            "trend": [_share(n - r, n) for n, r in zip(routed, recurred, strict=True)], "counts": routed,
            "recurred_counts": recurred,
            "by_role": [{"role": role, "routed": n, "recurred": r, "accuracy": _share(n - r, n)}
                        for role, (n, r) in sorted(by_role.items())]}


def budget_use(window: Window) -> dict[str, Any]:
    """Spend / allocation at each requirement's end (its binding dimension): median and max per role and playbook,
    and the median for whole requirements per period."""
    rows = window.entries(MetaKind.BUDGET_USE).exclude(data__use=None).values_list(
        "p", "role", "playbook", Cast(KT("data__use"), FloatField()))
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    per_period: list[list[float]] = [[] for _ in range(window.count)]
    for period, role, playbook, use in rows:
        if (i := window.index(period)) is not None:
            groups[(role, playbook)].append(use)
            if role == "":
                per_period[i].append(use)
    return {"by_role": [{"role": role or "requirement", "playbook": playbook, "entries": len(uses),
                         "median": round(statistics.median(uses), 4), "max": round(max(uses), 4)}
                        for (role, playbook), uses in sorted(groups.items())],
            "trend": [round(statistics.median(uses), 4) if uses else None for uses in per_period]}


def gate_signal(window: Window) -> dict[str, Any]:
    """Per gate: its false passes (hidden tests or a later gate failed what it passed) and its overridden fails
    (a person approved what it failed); both per period."""
    rows = window.entries(MetaKind.GATE_SIGNAL).annotate(gate=KT("data__gate")).values("p", "gate").annotate(
        false_passes=Count("pk", filter=Q(data__contradicted_by__in=FALSE_PASS)),
        overridden_fails=Count("pk", filter=Q(data__contradicted_by=OVERRIDDEN_FAIL)))
    trend = {"false_passes": [0] * window.count, "overridden_fails": [0] * window.count}
    by_gate: dict[str, dict[str, int]] = defaultdict(lambda: {"false_passes": 0, "overridden_fails": 0})
    for row in rows:
        if (i := window.index(row["p"])) is not None:
            for measure in trend:
                trend[measure][i] += row[measure]
                by_gate[row["gate"]][measure] += row[measure]
    return {**{measure: sum(values) for measure, values in trend.items()},
            "by_gate": [{"gate": gate, **counts} for gate, counts in sorted(by_gate.items())], "trend": trend}


def loops(window: Window) -> dict[str, Any]:
    """The mean of each loop count per run (a requirement that ended), per period and over the window."""
    means = {m: Avg(Cast(KT(f"data__{m}"), FloatField())) for m in LOOP_MEASURES}
    rows = window.entries(MetaKind.LOOPS).values("p").annotate(runs=Count("pk"), **means)
    runs, trend = [0] * window.count, {m: [None] * window.count for m in LOOP_MEASURES}
    for row in rows:
        if (i := window.index(row["p"])) is not None:
            runs[i] = row["runs"]
            for m in LOOP_MEASURES:
                trend[m][i] = None if row[m] is None else round(row[m], 2)
    return {"runs": sum(runs), "counts": runs, "trend": trend,
            "mean": {m: _weighted(trend[m], runs) for m in LOOP_MEASURES}}


def _weighted(values: Iterable[float | None], weights: list[int]) -> float | None:
    pairs = [(v, w) for v, w in zip(values, weights, strict=True) if v is not None and w]
    total = sum(w for _, w in pairs)
    return round(sum(v * w for v, w in pairs) / total, 2) if total else None


def promotions(window: Window) -> dict[str, Any]:
    """Acceptance rate: accepted and modified over decided (accepted, modified, rejected); a rollback is counted
    apart, as it follows an acceptance."""
    counts = {d: Count("pk", filter=Q(data__decision=d)) for d in (*DECIDED, "rolled_back")}
    rows = window.entries(MetaKind.PROMOTION).values("p").annotate(**counts)
    per = {d: [0] * window.count for d in counts}
    for row in rows:
        if (i := window.index(row["p"])) is not None:
            for d in counts:
                per[d][i] += row[d]
    decided = [sum(per[d][i] for d in DECIDED) for i in range(window.count)]
    accepted = [sum(per[d][i] for d in ACCEPTED) for i in range(window.count)]
    return {**{d: sum(values) for d, values in per.items()}, "decided": sum(decided), "counts": per,
            "acceptance_rate": _share(sum(accepted), sum(decided)),
            "trend": [_share(a, n) for a, n in zip(accepted, decided, strict=True)]}
