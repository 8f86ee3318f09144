"""The meta-evaluation page (docs/meta-eval.md): how well the team's machinery judges, with trends. The numbers come
from lifecycle.services.meta_eval_summary, one query per measure; the charts are drawn server-side (ADR 15)."""
from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from lifecycle.dashboard import charts
from lifecycle.dashboard.selectors import Scope
from lifecycle.services.meta_eval_summary import DEFAULT_PERIODS, Window, summary

LOOP_CSS = {"dev_attempts": "", "code_review_rounds": "second", "qc_rounds": "third"}


@staff_member_required
def meta_eval(request: HttpRequest) -> HttpResponse:
    period = "day" if request.GET.get("period") == "day" else "week"
    window = Window(period, DEFAULT_PERIODS[period], Scope.of(request.user).organization_ids)
    numbers = summary(window)
    context = {**admin.site.each_context(request), "title": "Meta-evaluation", "period": period, "s": numbers,
               "charts": _charts(numbers)}
    return TemplateResponse(request, "dashboard/meta_eval.html", context)


def _charts(s: dict[str, Any]) -> dict[str, charts.Chart]:
    per = s["period"]
    labels = [label[-3:] if per == "week" else label[5:] for label in s["periods"]]  # W48, 11-27: they fit a column
    routes, gates, loops, promotions = s["route_accuracy"], s["gate_signal"], s["loops"], s["promotion"]
    held = [n - r for n, r in zip(routes["counts"], routes["recurred_counts"], strict=True)]
    rejected = promotions["counts"]["rejected"]
    accepted = [a + m for a, m in zip(promotions["counts"]["accepted"], promotions["counts"]["modified"], strict=True)]
    return {
        "routes": charts.stacked(f"Routed fixes per {per}: held / same failure again",
                                 [(label, [h, r]) for label, h, r in zip(labels, held, routes["recurred_counts"], strict=True)],
                                 names=["held", "same failure again"], css=["", "breached"]),
        "budget": charts.bars("Budget use at the end, median per role and playbook (%)",
                              [(f"{r['role']} · {r['playbook']}", 100 * r["median"]) for r in s["budget_use"]["by_role"]],
                              unit=" %"),
        "budget_trend": charts.lines(f"Requirement budget use per {per}, median (%)", labels,
                                     {"median": [100 * (v or 0) for v in s["budget_use"]["trend"]]}, css=[""]),
        "gates": charts.stacked(f"Gate verdicts contradicted per {per}",
                                [(label, [f, o]) for label, f, o in zip(labels, gates["trend"]["false_passes"],
                                                                        gates["trend"]["overridden_fails"], strict=True)],
                                names=["false pass", "overridden fail"], css=["breached", "second"]),
        "loops": charts.lines(f"Loops per run, mean per {per}", labels,
                              {m.replace("_", " "): loops["trend"][m] for m in LOOP_CSS}, css=list(LOOP_CSS.values())),
        "promotions": charts.stacked(f"Promotions decided per {per}",
                                     [(label, [a, r]) for label, a, r in zip(labels, accepted, rejected, strict=True)],
                                     names=["accepted or modified", "rejected"], css=["", "breached"]),
    }
