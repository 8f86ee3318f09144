"""The staff dashboard and the evaluation runs page: numbers from selectors, charts drawn as SVG by the templates."""
from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.utils import timezone

from lifecycle.dashboard import charts, evals
from lifecycle.dashboard import selectors as q
from lifecycle.evals.report import run_json

DAYS = 14
DURATION_WINDOW = timedelta(days=30)


@staff_member_required
def dashboard(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    scope = q.Scope.of(request.user)
    by_role = q.llm_by_role(scope)
    context = {
        **admin.site.each_context(request), "title": "Staff dashboard", "now": now, "days": DAYS,
        "kpis": q.review_kpis(scope, now, now - DURATION_WINDOW), "loops": q.loop_counts(scope),
        "llm_roles": by_role, "llm_totals": q.llm_totals(by_role), "llm_requirements": q.llm_by_requirement(scope),
        "overdue": q.oldest_overdue(scope, now), "charts": _charts(scope, now, by_role),
    }
    return TemplateResponse(request, "dashboard/index.html", context)


def _charts(scope: q.Scope, now: Any, by_role: list[dict[str, Any]]) -> dict[str, charts.Chart]:
    ages = q.open_tasks_by_age(scope, now)
    medians = q.median_hours_in_state(scope, now - DURATION_WINDOW)
    return {
        "states": charts.bars("Requirements by state", q.requirements_by_state(scope)),
        "activity": _activity(scope, now),
        "medians": _medians(medians),
        "ages": charts.stacked("Open review tasks by age", [(label, [ok, late]) for label, ok, late in ages],
                               names=["within SLA", "SLA breached"], css=["", "breached"]),
        "attempts": charts.columns("Requirements by engineer attempts", q.histogram(scope, "dev_attempts"),
                                   name="requirements"),
        "story_rounds": charts.columns("Requirements by story review rounds", q.histogram(scope, "story_round"),
                                       name="requirements"),
        "cost_roles": charts.bars("LLM cost per role (USD)", [(r["role"], r["cost"]) for r in by_role]),
        "cache_roles": charts.bars("Prompt-cache hit rate per role (%)",
                                   [(r["role"], 100 * (r["cache_hit_rate"] or 0)) for r in by_role], unit=" %"),
    }


def _medians(medians: list[tuple[str, float, int]]) -> charts.Chart:
    """Hours, or minutes when every stay is shorter than an hour (a fast pipeline, a demo)."""
    scale, unit = (60, " min") if all(h < 1 for _, h, _ in medians) else (1, " h")
    return charts.bars("Median time in each state", [(f"{s} ({n})", h * scale) for s, h, n in medians], unit=unit)


def _activity(scope: q.Scope, now: Any) -> charts.Chart:
    first = now.date() - timedelta(days=DAYS - 1)
    per_day = q.activity_per_day(scope, now - timedelta(days=DAYS))
    days = [first + timedelta(days=i) for i in range(DAYS)]
    series = {name: [_on(per_day, day, key) for day in days] for name, key in
              (("submitted", "submitted"), ("deployed", "deployed"), ("review decisions", "decided"),
               ("escalations", "escalations"))}
    return charts.lines(f"Throughput per day (last {DAYS} days)", [d.strftime("%m-%d") for d in days], series,
                        css=["", "second", "third", "breached"])


def _on(per_day: dict[Any, dict[str, int]], day: date, key: str) -> int:
    return per_day.get(day, {}).get(key, 0)


@staff_member_required
def eval_runs(request: HttpRequest) -> HttpResponse:
    compare = request.GET.get("run", "")
    # not str.isdigit: "²" is a digit to it, and int() refuses thousands of digits
    run = int(compare) if re.fullmatch(r"[0-9]{1,18}", compare) else None
    scope = q.Scope.of(request.user)
    context = {**admin.site.each_context(request), "title": "Evaluation runs", "suites": evals.suites(scope, run),
               "hidden_runs": evals.hidden_runs(scope), "evaluation_organization": evals.ORGANIZATION}
    return TemplateResponse(request, "dashboard/evals.html", context)


@staff_member_required
def eval_run_export(request: HttpRequest, run_id: int) -> JsonResponse:
    """The run as `aiteam_eval export RUN_ID` prints it."""
    run = get_object_or_404(evals.visible_runs(q.Scope.of(request.user)), pk=run_id)
    return JsonResponse(run_json(run), encoder=DjangoJSONEncoder, json_dumps_params={"indent": 2})
