"""The meta-evaluation log over the API (docs/meta-eval.md): its entries, newest first, and its aggregates with
trends. A member sees the entries of their organizations, an operator (superuser) every entry, as on the staff
dashboard. Read-only: the log is written as runs happen, never through the API."""
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.settings import api_settings

from lifecycle.api.serializers import CappedChoiceField, StrictSerializer
from lifecycle.dashboard.selectors import Scope
from lifecycle.errors import DomainError
from lifecycle.models import MetaEvalLog, MetaKind, Project
from lifecycle.selectors import projects_visible_to
from lifecycle.services.meta_eval_summary import DEFAULT_PERIODS, LOOP_MEASURES, MAX_PERIODS, PERIODS, Window, summary

PAGE_PARAMETERS = ("limit", "offset", api_settings.URL_FORMAT_OVERRIDE)  # the pager's and DRF's own, not filters


class MetaEvalQueryIn(StrictSerializer):
    kind = CappedChoiceField(choices=MetaKind.choices, required=False)
    project = serializers.UUIDField(required=False, help_text="one project of your organizations")


class MetaEvalSummaryQueryIn(StrictSerializer):
    period = CappedChoiceField(choices=list(PERIODS), default="week", help_text="ISO weeks or days")
    periods = serializers.IntegerField(min_value=1, max_value=max(MAX_PERIODS.values()), required=False,
                                       help_text=f"how many, this one included (default {DEFAULT_PERIODS}, "
                                       f"at most {MAX_PERIODS})")
    project = serializers.UUIDField(required=False, help_text="one project of your organizations")

    def validate(self, attrs):
        attrs = super().validate(attrs)
        most = MAX_PERIODS[attrs["period"]]
        if attrs.setdefault("periods", DEFAULT_PERIODS[attrs["period"]]) > most:
            raise serializers.ValidationError({"periods": [f"at most {most} for a {attrs['period']}"]})
        return attrs


class MetaEvalEntryOut(serializers.ModelSerializer):
    data = serializers.JSONField(help_text="the measure; its fields per kind are in docs/meta-eval.md")

    class Meta:
        model = MetaEvalLog
        fields = ["id", "kind", "created_at", "organization", "project", "requirement", "role", "playbook", "data"]


def _shares(**kwargs):
    return serializers.ListField(child=serializers.FloatField(allow_null=True), **kwargs)


def _counts(**kwargs):
    return serializers.ListField(child=serializers.IntegerField(), **kwargs)


class RouteRoleOut(serializers.Serializer):
    role = serializers.CharField()
    routed = serializers.IntegerField()
    recurred = serializers.IntegerField()
    accuracy = serializers.FloatField(allow_null=True)


class RouteAccuracyOut(serializers.Serializer):
    routed = serializers.IntegerField(help_text="routed fixes judged")
    recurred = serializers.IntegerField(help_text="… followed by the same failure (misroutes)")
    accuracy = serializers.FloatField(allow_null=True, help_text="(routed - recurred) / routed; null: none routed")
    trend = _shares(help_text="accuracy per period")
    counts = _counts(help_text="routed fixes per period")
    recurred_counts = _counts(help_text="misroutes per period")
    by_role = RouteRoleOut(many=True)


class BudgetRoleOut(serializers.Serializer):
    role = serializers.CharField(help_text="a role, or `requirement` for the whole requirement")
    playbook = serializers.CharField()
    entries = serializers.IntegerField()
    median = serializers.FloatField(help_text="spent / allocated, of the most used dimension")
    max = serializers.FloatField()


class BudgetUseOut(serializers.Serializer):
    by_role = BudgetRoleOut(many=True)
    trend = _shares(help_text="median use of whole requirements per period")


class GateOut(serializers.Serializer):
    gate = serializers.CharField()
    false_passes = serializers.IntegerField()
    overridden_fails = serializers.IntegerField()


class GateTrendOut(serializers.Serializer):
    false_passes = _counts()
    overridden_fails = _counts()


class GateSignalOut(serializers.Serializer):
    false_passes = serializers.IntegerField(help_text="passed, then failed by hidden tests or a later gate")
    overridden_fails = serializers.IntegerField(help_text="failed, then approved by a person")
    by_gate = GateOut(many=True)
    trend = GateTrendOut()


LoopMeansOut = type("LoopMeansOut", (serializers.Serializer,),
                    {m: serializers.FloatField(allow_null=True) for m in LOOP_MEASURES})
LoopTrendOut = type("LoopTrendOut", (serializers.Serializer,), {m: _shares() for m in LOOP_MEASURES})


class LoopsOut(serializers.Serializer):
    runs = serializers.IntegerField(help_text="requirements that ended")
    counts = _counts(help_text="runs per period")
    mean = LoopMeansOut()
    trend = LoopTrendOut()


class PromotionCountsOut(serializers.Serializer):
    accepted = _counts()
    modified = _counts()
    rejected = _counts()
    rolled_back = _counts()


class PromotionRatesOut(serializers.Serializer):
    accepted = serializers.IntegerField()
    modified = serializers.IntegerField()
    rejected = serializers.IntegerField()
    rolled_back = serializers.IntegerField()
    decided = serializers.IntegerField(help_text="accepted + modified + rejected")
    acceptance_rate = serializers.FloatField(allow_null=True, help_text="(accepted + modified) / decided")
    counts = PromotionCountsOut(help_text="each decision per period")
    trend = _shares(help_text="acceptance rate per period")


class MetaEvalSummaryOut(serializers.Serializer):
    period = serializers.ChoiceField(choices=list(PERIODS))
    periods = serializers.ListField(child=serializers.CharField(), help_text="each period's label, oldest first: "
                                    "every trend is aligned with it")
    route_accuracy = RouteAccuracyOut()
    budget_use = BudgetUseOut()
    gate_signal = GateSignalOut()
    loops = LoopsOut()
    promotion = PromotionRatesOut()


class MetaEvalViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """The meta-evaluation log's entries, newest first; filter by `kind` and `project`."""

    serializer_class = MetaEvalEntryOut

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return MetaEvalLog.objects.none()
        query = _query(MetaEvalQueryIn, self.request)
        entries = Scope.of(self.request.user).filter(MetaEvalLog.objects.all())
        if "kind" in query:
            entries = entries.filter(kind=query["kind"])
        if "project" in query:
            entries = entries.filter(project=_project(self.request, query["project"]))
        return entries.order_by("-created_at", "-id")

    @extend_schema(parameters=[MetaEvalQueryIn])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(parameters=[MetaEvalSummaryQueryIn], responses={200: MetaEvalSummaryOut})
    @action(detail=False, methods=["get"], pagination_class=None)
    def summary(self, request):
        """Route accuracy, budget use, gate signal quality, loops per run and promotion acceptance, per period."""
        query = _query(MetaEvalSummaryQueryIn, request)
        project = _project(request, query["project"]).pk if "project" in query else None
        window = Window(query["period"], query["periods"], Scope.of(request.user).organization_ids, project)
        return Response(MetaEvalSummaryOut(summary(window)).data)


def _query(serializer_class, request) -> dict:
    filters = {k: v for k, v in request.query_params.items() if k not in PAGE_PARAMETERS}
    query = serializer_class(data=filters)
    query.is_valid(raise_exception=True)
    return query.validated_data


def _project(request, project_id):
    projects = Project.objects.all() if request.user.is_superuser else projects_visible_to(request.user)
    project = projects.filter(pk=project_id).first()
    if project is None:
        raise DomainError("no such project", "project")
    return project
