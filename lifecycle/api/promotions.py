"""Promotions over the API (ADR 39): propose a change to a project's prompts, budget profile or playbook table with
two eval runs as its evidence; the project's owners accept, modify or reject it; one POST rolls an adopted version
back. Thin: the view checks what the caller may see (other organizations' rows are 404), validates, calls one
service, serializes."""
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response

from lifecycle.actors import Actor
from lifecycle.api.parsers import BoundedJSONParser
from lifecycle.api.serializers import CappedChoiceField, ErrorOut, StrictCharField, StrictSerializer
from lifecycle.errors import DomainError
from lifecycle.evals.report import case_changes, summary
from lifecycle.models import Project, PromotedArtifact, PromotionDecision
from lifecycle.services.promotions import (
    ACCEPT,
    MODIFY,
    REASON_MAX_CHARS,
    REJECT,
    eval_runs_visible_to,
    promotion_decide,
    promotion_propose,
    promotion_propose_prompts,
    promotion_rollback,
    promotions_visible_to,
)

CONFLICT = OpenApiResponse(ErrorOut, description="decided already, or the current version changed meanwhile")
PROPOSED_ALREADY = OpenApiResponse(ErrorOut, description="the same candidate is proposed already and waits for the "
                                                         "owners (the detail names that proposal)")


class PromotionIn(StrictSerializer):
    project = serializers.UUIDField()
    artifact = CappedChoiceField(choices=PromotedArtifact.choices)
    candidate = serializers.JSONField(help_text=(
        "prompts: the changed prompts, an object of prompt name → text (the rest stay as they are now); "
        "budgets: the whole budget profile; playbooks: the whole playbook table (ticket kind → playbook)"))
    current_run = serializers.IntegerField(help_text="an eval run of the suite with the current version")
    candidate_run = serializers.IntegerField(help_text="the same suite run with the candidate")
    expected_effect = StrictCharField(max_length=REASON_MAX_CHARS)
    justification = StrictCharField(max_length=REASON_MAX_CHARS, required=False, default="", allow_blank=True)


class PromotionDecisionIn(StrictSerializer):
    reason = StrictCharField(max_length=REASON_MAX_CHARS)


class PromotionModificationIn(PromotionDecisionIn):
    modified = serializers.JSONField(help_text="prompts: prompt name → text over the candidate's; otherwise the "
                                               "whole value")


class PromotionSummaryOut(serializers.ModelSerializer):
    proposed_by = serializers.StringRelatedField(allow_null=True)
    decided_by = serializers.StringRelatedField(allow_null=True)

    class Meta:
        model = PromotionDecision
        fields = ["id", "project", "artifact", "kind", "state", "current_version", "candidate_version", "change",
                  "adopted_version", "adopted_change", "expected_effect", "justification", "proposer", "proposed_by",
                  "current_run", "candidate_run", "rollback_of", "decided_by", "decided_via", "decided_at", "reason",
                  "created_at"]


class PromotionOut(PromotionSummaryOut):
    """A promotion with its evidence (the list leaves that out: read one to see both runs)."""

    evidence = serializers.SerializerMethodField()

    class Meta(PromotionSummaryOut.Meta):
        fields = [*PromotionSummaryOut.Meta.fields, "evidence"]

    def get_evidence(self, row) -> dict | None:
        """Both runs side by side: each run's summary, then case by case."""
        if not (row.current_run_id and row.candidate_run_id):
            return None
        before, after = (list(run.cases.order_by("id")) for run in (row.current_run, row.candidate_run))
        return {"current": summary(before), "candidate": summary(after), "cases": [
            {"name": c.name, "changed": c.changed,
             **{side: case and {"outcome": case.outcome, "hidden": case.hidden, "hidden_passed": case.hidden_passed,
                                "gate_false_pass": case.gate_false_pass, "cost_usd": str(case.cost_usd)}
                for side, case in (("current", c.before), ("candidate", c.after))}}
            for c in case_changes(before, after)]}


class PromotionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Promotions in your organizations, newest first (?state=proposed for the ones waiting)."""

    serializer_class = PromotionOut
    parser_classes = [BoundedJSONParser]  # candidate and modified are JSON values: only the bounded JSON parser

    def get_serializer_class(self):
        return PromotionSummaryOut if self.action == "list" else PromotionOut

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return PromotionDecision.objects.none()
        rows = promotions_visible_to(self.request.user).select_related("current_run", "candidate_run")
        if self.action == "list" and (state := self.request.query_params.get("state")):  # a filter of the list only
            if state not in PromotionDecision.State.values:
                raise DomainError(f"unknown state; use one of {', '.join(PromotionDecision.State.values)}", "state")
            rows = rows.filter(state=state)
        return rows.order_by("-created_at")

    @extend_schema(request=PromotionIn, responses={201: PromotionOut, 404: OpenApiResponse(
        ErrorOut, description="the project is not in your organizations, or an eval run is not one you can read"),
        409: PROPOSED_ALREADY})
    def create(self, request):
        """Propose: both runs must be of one suite, run the same way, with the current version and the candidate;
        the owners are told. A candidate proposed already and not yet decided is refused (409)."""
        data = PromotionIn(data=request.data)
        data.is_valid(raise_exception=True)
        given = data.validated_data
        project = get_object_or_404(Project.objects.filter(organization__memberships__user=request.user).distinct(),
                                    pk=given["project"])
        runs = eval_runs_visible_to(request.user)
        current_run, candidate_run = (get_object_or_404(runs, pk=given[key]) for key in ("current_run", "candidate_run"))
        proposal = {"current_run": current_run, "candidate_run": candidate_run, "actor": Actor.human(request.user, "api"),
                    "expected_effect": given["expected_effect"], "justification": given["justification"]}
        if given["artifact"] != PromotedArtifact.PROMPTS:
            row = promotion_propose(project=project, artifact=given["artifact"], candidate=given["candidate"], **proposal)
        elif isinstance(given["candidate"], dict):
            row = promotion_propose_prompts(project=project, changed=given["candidate"], **proposal)
        else:
            raise serializers.ValidationError({"candidate": ["an object of prompt name → text"]})
        return Response(PromotionOut(row).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=PromotionDecisionIn, responses={200: PromotionOut, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def accept(self, request, pk=None):
        """Accept (owners only): the candidate becomes current for requirements submitted from now on."""
        return self._decide(request, pk, ACCEPT, PromotionDecisionIn)

    @extend_schema(request=PromotionModificationIn, responses={200: PromotionOut, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def modify(self, request, pk=None):
        """Accept with your own changes to the candidate (owners only)."""
        return self._decide(request, pk, MODIFY, PromotionModificationIn)

    @extend_schema(request=PromotionDecisionIn, responses={200: PromotionOut, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        """Reject (owners only): nothing changes."""
        return self._decide(request, pk, REJECT, PromotionDecisionIn)

    @extend_schema(request=PromotionDecisionIn, responses={201: PromotionOut, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def rollback(self, request, pk=None):
        """Make the version before this decision current again (owners only); answers the rollback's own row."""
        row = get_object_or_404(self.get_queryset(), pk=pk)
        data = PromotionDecisionIn(data=request.data)
        data.is_valid(raise_exception=True)
        done = promotion_rollback(decision_id=row.pk, actor=Actor.human(request.user, "api"),
                                  reason=data.validated_data["reason"])
        return Response(PromotionOut(done).data, status=status.HTTP_201_CREATED)

    def _decide(self, request, pk, decision: str, form: type[StrictSerializer]) -> Response:
        row = get_object_or_404(self.get_queryset(), pk=pk)
        data = form(data=request.data)
        data.is_valid(raise_exception=True)
        decided = promotion_decide(decision_id=row.pk, actor=Actor.human(request.user, "api"), decision=decision,
                                   reason=data.validated_data["reason"], modified=data.validated_data.get("modified"))
        return Response(PromotionOut(decided).data)
