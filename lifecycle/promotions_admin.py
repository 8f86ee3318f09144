"""Promotions in the admin (ADR 39): the list of proposals and decisions in the person's organizations, and a
promotion's page, the owner's review task: the change, the expected effect, both eval runs side by side (totals, then
case by case), the decision (accept, accept modified, reject, with a reason) and, once a version was adopted, the one
action that rolls it back. Every POST calls one service as the signed-in person; the service checks who may."""
from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from lifecycle.actors import Actor
from lifecycle.api.parsers import json_problem
from lifecycle.conversations_admin import REFUSED, StaffMember
from lifecycle.evals.report import case_changes, summary
from lifecycle.models import EvalRun, PromotionDecision, PromptBundle
from lifecycle.services.promotions import (
    DECISIONS,
    is_owner,
    promotion_decide,
    promotion_rollback,
    promotions_visible_to,
    versions_history,
)

SIDE_BY_SIDE = (("cases", "cases"), ("deployed", "deployed"), ("hidden_full", "hidden tests full"),
                ("gate_false_passes", "gate false passes"), ("loops", "fix loops and rounds"),
                ("tokens", "tokens"), ("cache_read_tokens", "tokens read from cache"), ("cost_usd", "cost (USD)"),
                ("wall_s", "wall time (s)"))


@admin.register(PromotionDecision)
class PromotionDecisionAdmin(StaffMember, admin.ModelAdmin):
    """Proposals waiting for their owners first, then every decision: the history of what was current when."""

    list_display = ["created_at", "project", "artifact", "kind", "state", "proposer", "proposed_by", "decided_by"]
    list_filter = ["state", "artifact", "kind"]
    list_select_related = ["project__organization", "proposed_by", "decided_by"]

    def get_queryset(self, request):
        return promotions_visible_to(request.user)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        row = self._row(request, object_id)
        return TemplateResponse(request, "admin/lifecycle/promotiondecision/promotion.html", {
            **self.admin_site.each_context(request), "opts": PromotionDecision._meta, "title": str(row),
            **promotion_page(request, row)})

    def get_urls(self):
        def mount(route: str, view, name: str):
            return path(route, self.admin_site.admin_view(lambda request, **kw: view(self, request, **kw)),
                        name=f"lifecycle_promotiondecision_{name}")

        return [mount("<uuid:pk>/decide/", decide, "decide"), mount("<uuid:pk>/rollback/", rollback, "rollback"),
                *super().get_urls()]

    def _row(self, request: HttpRequest, pk: Any) -> PromotionDecision:
        try:
            return get_object_or_404(self.get_queryset(request), pk=pk)
        except ValidationError:  # not a UUID
            raise Http404("no such promotion") from None


def promotion_page(request: HttpRequest, row: PromotionDecision) -> dict[str, Any]:
    owner = is_owner(request.user, row.project)
    runs = [row.current_run, row.candidate_run]
    cases = {run.pk: list(run.cases.order_by("id")) for run in runs if run}
    return {
        "row": row, "owner": owner, "may_decide": owner and row.is_open,
        "may_roll_back": owner and row.adopted is not None, "decisions": list(DECISIONS),
        "runs": runs, "totals": _totals(row.current_run, row.candidate_run, cases),
        "changes": case_changes(*(cases.get(run.pk, []) if run else [] for run in runs)),
        "modified_example": _example(row), "history": versions_history(row.project, row.artifact)[:20],
        "decide_url": reverse("admin:lifecycle_promotiondecision_decide", args=[row.pk]),
        "rollback_url": reverse("admin:lifecycle_promotiondecision_rollback", args=[row.pk]),
    }


def _totals(before: EvalRun | None, after: EvalRun | None, cases: dict[int, list]) -> list[tuple[str, Any, Any]]:
    def measured(run: EvalRun | None) -> dict[str, Any]:
        rows = cases.get(run.pk, []) if run else []
        return {**summary(rows), "deployed": sum(c.outcome == "deployed" for c in rows),
                "loops": sum(sum(c.loops.values()) - c.loops.get("qc_rounds", 0) for c in rows),
                "cache_read_tokens": sum(c.cache_read_tokens for c in rows),
                "wall_s": round(sum(c.wall_s for c in rows), 1)}

    old, new = measured(before), measured(after)
    return [(label, old[key], new[key]) for key, label in SIDE_BY_SIDE]


def _example(row: PromotionDecision) -> str:
    """What the modification box starts with: the changed prompts' candidate texts, or the candidate value."""
    if row.artifact == "prompts":
        prompts = PromptBundle.objects.get(sha256=row.candidate).prompts
        return json.dumps({c["prompt"]: prompts.get(c["prompt"], "") for c in row.change}, indent=2, ensure_ascii=False)
    return json.dumps(row.candidate, indent=2, ensure_ascii=False)


def decide(model_admin: PromotionDecisionAdmin, request: HttpRequest, pk: Any) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    row = model_admin._row(request, pk)
    choice, modified = request.POST.get("decision", ""), None
    if choice == "modify":
        try:
            modified = json.loads(request.POST.get("modified") or "null")
            problem = json_problem(modified, settings.AITEAM_JSON_MAX_DEPTH)
        except (ValueError, RecursionError) as exc:  # ValueError: JSONDecodeError, or an integer of 4,300+ digits
            problem = f"not JSON ({exc})" if isinstance(exc, ValueError) else "nested too deep"
        if problem:
            messages.error(request, f"not decided: the modification is refused: {problem}")
            return redirect("admin:lifecycle_promotiondecision_change", row.pk)
    try:
        decided = promotion_decide(decision_id=row.pk, actor=Actor.human(request.user, "admin"), decision=choice,
                                   reason=request.POST.get("reason", ""), modified=modified)
    except REFUSED as exc:
        messages.error(request, f"not decided: {exc}")
        return redirect("admin:lifecycle_promotiondecision_change", row.pk)
    messages.success(request, f"{decided.get_artifact_display()}: {decided.state}")
    return redirect("admin:lifecycle_promotiondecision_change", row.pk)


def rollback(model_admin: PromotionDecisionAdmin, request: HttpRequest, pk: Any) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    row = model_admin._row(request, pk)
    try:
        done = promotion_rollback(decision_id=row.pk, actor=Actor.human(request.user, "admin"),
                                  reason=request.POST.get("reason", ""))
    except REFUSED as exc:
        messages.error(request, f"not rolled back: {exc}")
        return redirect("admin:lifecycle_promotiondecision_change", row.pk)
    messages.success(request, f"rolled back: the version before it is current again ({done.adopted_version[:12]})")
    return redirect("admin:lifecycle_promotiondecision_change", done.pk)
