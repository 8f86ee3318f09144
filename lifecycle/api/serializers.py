"""Input serializers (strict: unknown fields and wrong types are 400) and output serializers."""
from django.conf import settings
from django.db.models import Count, Sum
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from lifecycle import playbooks
from lifecycle.errors import ECHO_MAX_NAMES, echoed
from lifecycle.failure_rules import Route, Source
from lifecycle.models import (
    Artifact,
    FailureRoute,
    Project,
    Replay,
    Requirement,
    RequirementDoc,
    ReviewTask,
    StateTransition,
    Step,
    UserStory,
)
from lifecycle.replay.compare import describe
from lifecycle.selectors import origins_visible_to
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.reviews import DECISION_TEXTS, TEXT_MAX_CHARS
from lifecycle.services.story_edits import stories_version
from lifecycle.states import ArtifactKind, Decision
from lifecycle.tickets import KEY_MAX_CHARS, TITLE_MAX_CHARS, URL_MAX_CHARS, Ticket, TicketSource, ticket_problems


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers, booleans, lists: a brief must be a string."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class CappedChoiceField(serializers.ChoiceField):
    """DRF's ChoiceField, but a refusal repeats at most ECHO_MAX_CHARS of the value (DRF's repeats all of it: a
    1 MB value came back as a 1 MB error)."""

    def fail(self, key, **kwargs):
        if "input" in kwargs:
            kwargs["input"] = echoed(kwargs["input"])
        super().fail(key, **kwargs)


def unknown_fields(data: object, fields) -> dict[str, list[str]]:
    """The refusal of the names in `data` that are not `fields`: the first ECHO_MAX_NAMES, each as echoed (at most
    ECHO_MAX_CHARS of it), and how many more under non_field_errors (100,000 unknown keys came back one by one)."""
    if not isinstance(data, dict):
        return {}
    names = sorted(set(data) - set(fields))
    refused = {echoed(name): ["unknown field"] for name in names[:ECHO_MAX_NAMES]}
    if len(names) > ECHO_MAX_NAMES:
        refused.setdefault(api_settings.NON_FIELD_ERRORS_KEY, []).append(
            f"and {len(names) - ECHO_MAX_NAMES} more unknown fields")
    return refused


class StrictSerializer(serializers.Serializer):
    """Unknown fields are 400s, named beside the known fields' errors (a misspelt field is not reported as the
    right one missing)."""

    def to_internal_value(self, data):
        unknown = unknown_fields(data, self.fields)
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not (unknown and isinstance(exc.detail, dict)):
                raise
            raise serializers.ValidationError({**exc.detail, **unknown}) from None
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


class TicketIn(StrictSerializer):
    """A ticket from a tracker: its body is the brief, its title the requirement's title."""

    # "cli" is the operator's terminal's (aiteam_ticket), never a member's: it names its branch by key (ADR 42)
    source = CappedChoiceField(choices=[c for c in TicketSource.choices if c[0] != TicketSource.CLI], required=False,
                               default=TicketSource.API)
    key = StrictCharField(max_length=KEY_MAX_CHARS, help_text="e.g. #42 (github, gitlab) or PROJ-7 (jira); one live "
                          "requirement per project, source and key")
    url = StrictCharField(max_length=URL_MAX_CHARS, required=False, allow_blank=True, default="",
                          help_text="an http:// or https:// address of the ticket")
    title = StrictCharField(max_length=TITLE_MAX_CHARS, required=False, allow_blank=True, default="")
    body = StrictCharField(max_length=settings.AITEAM_BRIEF_MAX_CHARS, required=False, allow_blank=True, default="",
                           help_text="the brief (the title stands in for an empty body)")

    def validate(self, attrs):
        if problems := ticket_problems(Ticket(**attrs)):
            raise serializers.ValidationError({field: [problem] for field, problem in problems.items()})
        return attrs


class RequirementIn(StrictSerializer):
    brief = StrictCharField(max_length=settings.AITEAM_BRIEF_MAX_CHARS, trim_whitespace=True, required=False,
                            help_text="what to build; or send `ticket` instead (exactly one of the two)")
    ticket = TicketIn(required=False, help_text="a tracker's ticket instead of a brief")
    title = StrictCharField(max_length=200, required=False, allow_blank=True, default="")
    project = serializers.UUIDField(required=False)
    playbook = CappedChoiceField(choices=playbooks.CHOICES, required=False, default=playbooks.DEFAULT)

    def to_internal_value(self, data):
        if isinstance(data, dict) and "brief" in data and "ticket" in data:  # before either is read
            raise serializers.ValidationError({"ticket": ["send a brief or a ticket, not both"]})
        return super().to_internal_value(data)

    def validate(self, attrs):
        if "brief" not in attrs and "ticket" not in attrs:
            raise serializers.ValidationError({"brief": ["This field is required (or send a ticket)."]})
        if "ticket" in attrs and attrs["title"]:
            raise serializers.ValidationError({"title": ["a ticket's title goes in ticket.title"]})
        return attrs


class DecisionIn(StrictSerializer):
    decision = CappedChoiceField(choices=Decision.choices)
    reason = StrictCharField(max_length=TEXT_MAX_CHARS["reason"], required=False, allow_blank=True, default="")
    feedback = StrictCharField(max_length=TEXT_MAX_CHARS["feedback"], required=False, allow_blank=True, default="")
    answer = StrictCharField(max_length=TEXT_MAX_CHARS["answer"], required=False, allow_blank=True, default="")
    constraint = StrictCharField(max_length=TEXT_MAX_CHARS["constraint"], required=False, allow_blank=True, default="",
                                 help_text="inject_constraint: the constraint every later agent step must follow")
    budget = serializers.DictField(required=False, help_text='override_budget: new limits, e.g. {"requirement": '
                                   '{"tokens": 800000, "cost_usd": "12"}, "roles": {"senior_engineer": {"steps": 30}}}')
    stories_version = StrictCharField(max_length=64, required=False, allow_null=True, default=None, help_text=(
        "a stories approval: the task's `stories_version` as you read the stories (required to approve); stories "
        "edited since are a 409 (`code` stories_changed) and nothing is decided"))

    def validate(self, attrs):
        """Each decision keeps its own text: a text it does not take is refused, never recorded as another's."""
        takes = DECISION_TEXTS.get(attrs["decision"], ())
        stray = {name: [f"a '{attrs['decision']}' decision does not take {name}; it takes {' or '.join(takes)}"]
                 for name in TEXT_MAX_CHARS if attrs.get(name, "").strip() and name not in takes}
        if stray:
            raise serializers.ValidationError(stray)
        return attrs


class DocOut(serializers.ModelSerializer):
    class Meta:
        model = RequirementDoc
        fields = ["version", "summary", "objectives", "out_of_scope", "assumptions", "constraints", "success_metrics",
                  "acceptance_criteria"]


class StoryOut(serializers.ModelSerializer):
    class Meta:
        model = UserStory
        fields = ["id", "round", "position", "title", "as_a", "i_want", "so_that", "acceptance_criteria",
                  "priority", "story_points", "state", "rejection_reason"]


class ArtifactOut(serializers.ModelSerializer):
    content_hash = serializers.CharField(read_only=True)

    class Meta:
        model = Artifact
        fields = ["id", "kind", "name", "version", "content_hash", "summary", "approved", "created_at"]


class ErrorOut(serializers.Serializer):
    """An error answer: `detail` (with a `code` on some), or on a 400 each field named with its messages."""

    detail = serializers.CharField(required=False)
    code = serializers.CharField(required=False)


class TransitionOut(serializers.ModelSerializer):
    actor_user = serializers.StringRelatedField(allow_null=True)
    metadata = serializers.JSONField(help_text="what the transition carried (reason, decision, …); `origin` (where a "
                                     "person acted from) only for the organization's admins and operators")

    class Meta:
        model = StateTransition
        fields = ["subject", "subject_id", "event", "from_state", "to_state", "actor_role", "actor_user", "via",
                  "guard", "metadata", "created_at"]


def without_origins(transitions: list[dict]) -> list[dict]:
    """Serialized transitions with `metadata.origin` left out (copies: the rows' own dicts stay as they are)."""
    return [{**row, "metadata": {k: v for k, v in row["metadata"].items() if k != "origin"}} for row in transitions]


class ReviewTaskOut(serializers.ModelSerializer):
    requirement = serializers.UUIDField(source="requirement_id")
    stories_version = serializers.SerializerMethodField(help_text=(
        "a stories approval: the version of its stories (`context.stories`) as shown here, a hash of their text; "
        "send it back with the decision. null for other kinds"))
    decided_by = serializers.StringRelatedField(allow_null=True)
    assignee = serializers.StringRelatedField(allow_null=True)
    assignee_group = serializers.StringRelatedField(allow_null=True)

    class Meta:
        model = ReviewTask
        fields = ["id", "requirement", "kind", "round", "state", "question", "reasoning", "context", "options",
                  "decision", "reason", "feedback", "decided_by", "decided_by_policy", "decided_via", "decided_at",
                  "sla_deadline", "assignee", "created_at", "decision_data",
                  "stories_version", "assignee_group", "escalation_policy", "decide_by", "escalation_count", "policy"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_stories_version(self, task: ReviewTask) -> str | None:
        return stories_version(task) or None


class TicketOut(serializers.ModelSerializer):
    """The ticket a requirement came from (its title is the requirement's)."""

    source = serializers.ChoiceField(choices=TicketSource.choices, source="ticket_source")
    key = serializers.CharField(source="ticket_key")
    url = serializers.CharField(source="ticket_url")

    class Meta:
        model = Requirement
        fields = ["source", "key", "url"]


class RequirementSummaryOut(serializers.ModelSerializer):
    project = serializers.UUIDField(source="project_id")
    replay_of = serializers.UUIDField(source="replay_of_id", allow_null=True, read_only=True)
    prompt_bundle = serializers.CharField(source="prompt_bundle_id", allow_null=True)
    ticket = serializers.SerializerMethodField()

    class Meta:
        model = Requirement
        fields = ["id", "title", "state", "project", "playbook", "prompt_bundle", "replay_of", "created_at",
                  "state_changed_at", "ticket"]

    @extend_schema_field(TicketOut(allow_null=True))
    def get_ticket(self, obj):
        return TicketOut(obj).data if obj.ticket_source else None


class RequirementCreatedOut(RequirementSummaryOut):
    """What POST answers: the new requirement's own fields (it has no stories, artifacts or calls yet)."""

    class Meta(RequirementSummaryOut.Meta):
        fields = [*RequirementSummaryOut.Meta.fields, "brief"]


class ReplayOut(serializers.ModelSerializer):
    differences = serializers.SerializerMethodField()

    class Meta:
        model = Replay
        fields = ["verdict", "via", "created_at", "compared_at", "differences", "comparison"]

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_differences(self, run):
        return describe(run.comparison) if run.comparison else []


class LlmUsageOut(serializers.Serializer):
    """The requirement's model calls, summed."""

    calls = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField()
    cost_usd = serializers.DecimalField(max_digits=12, decimal_places=6, coerce_to_string=False)  # a JSON number


class RequirementOut(RequirementSummaryOut):
    brief = serializers.CharField()
    requirement_doc = serializers.SerializerMethodField()
    stories = StoryOut(many=True)
    artifacts = ArtifactOut(many=True)
    transitions = TransitionOut(many=True)
    open_review_tasks = serializers.SerializerMethodField()
    llm_usage = serializers.SerializerMethodField()
    status_digest = serializers.SerializerMethodField()
    budget = serializers.SerializerMethodField()
    replay = serializers.SerializerMethodField()

    class Meta(RequirementSummaryOut.Meta):
        fields = [*RequirementSummaryOut.Meta.fields, "brief", "clarifications", "requirement_doc", "stories",
                  "artifacts", "transitions", "open_review_tasks", "llm_usage", "status_digest", "budget", "replay"]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")  # no request (an internal use): no one to show origins to
        if not (request and origins_visible_to(request.user, instance.organization_id)):
            data["transitions"] = without_origins(data["transitions"])
        return data

    @extend_schema_field(DocOut(allow_null=True))
    def get_requirement_doc(self, obj):
        doc = obj.docs.order_by("-version").first()
        return DocOut(doc).data if doc else None

    @extend_schema_field(ReviewTaskOut(many=True))
    def get_open_review_tasks(self, obj):
        pending = obj.review_tasks.pending().select_related("decided_by", "assignee", "assignee_group")
        return ReviewTaskOut(pending, many=True).data

    @extend_schema_field(serializers.JSONField(allow_null=True, help_text="the project manager's latest digest"))
    def get_status_digest(self, obj):
        digest = latest(obj, ArtifactKind.STATUS_DIGEST, "digest")
        return {"updated_at": digest.created_at, **content_json(digest)} if digest else None

    @extend_schema_field(serializers.JSONField(help_text="exhausted, paused_from, constraints, overrides, standing"))
    def get_budget(self, obj):
        """Spend against limits, per dimension, for the requirement and each role (lifecycle/services/budgets.py)."""
        from lifecycle.services.budgets import budget_report

        return budget_report(obj)

    @extend_schema_field(ReplayOut(allow_null=True))
    def get_replay(self, obj):
        """On a replay: its verdict and the comparison with its source (None on any other requirement)."""
        try:
            return ReplayOut(obj.replay_run).data  # select_related by the view
        except Replay.DoesNotExist:
            return None

    @extend_schema_field(LlmUsageOut)
    def get_llm_usage(self, obj):
        totals = obj.llm_calls.aggregate(
            calls=Count("id"), input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"),
            cache_read_tokens=Sum("cache_read_tokens"), cost_usd=Sum("cost_usd"),
        )
        return LlmUsageOut({k: v or 0 for k, v in totals.items()}).data


class RoutingQueryIn(StrictSerializer):
    """Filters of GET /requirements/{id}/routing/ (query parameters)."""

    route = CappedChoiceField(choices=[r.value for r in Route], required=False)
    source = CappedChoiceField(choices=[s.value for s in Source], required=False)


class StepRefOut(serializers.ModelSerializer):
    class Meta:
        model = Step
        fields = ["id", "key", "attempt"]


class FailureRouteOut(serializers.ModelSerializer):
    step = StepRefOut(allow_null=True)

    class Meta:
        model = FailureRoute
        fields = ["id", "created_at", "source", "step", "summary", "signature", "route", "rule", "matched", "trace",
                  "facts", "action"]


class RetriageIn(StrictSerializer):
    """A reviewer's override of the Product Owner's triage: the playbook to run, and why."""

    playbook = CappedChoiceField(choices=playbooks.CHOICES)
    reason = StrictCharField(max_length=2000, help_text="why the triage's playbook was wrong (in the audit trail)")


class CancelIn(StrictSerializer):
    """A person cancels a requirement: why (in the audit trail and the ticket's comment)."""

    reason = StrictCharField(max_length=2000, help_text="why the requirement is cancelled")


class ReplayIn(StrictSerializer):
    """POST /requirements/{id}/replay/ takes no input: the recording decides everything."""


class ProjectRef(serializers.ModelSerializer):
    class Meta:
        model = Project
        fields = ["id", "name"]


class StrictBooleanField(serializers.BooleanField):
    """true or false, nothing that merely looks like one ("yes", 1, "on"): an opt-in is said plainly."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class ProjectIn(StrictSerializer):
    autonomous_deployments = StrictBooleanField(help_text=(
        "true grants the project's pre-authorization of deployment_approval:approve, false withdraws it: the "
        "project's deployments are approved when their gate opens, except a change that adds or edits a CI "
        "workflow, uses secrets. in one or was flagged by the scope guard, which still waits for a person. "
        "Organization admins only"))


class ProjectOut(serializers.ModelSerializer):
    organization = serializers.UUIDField(source="organization_id")
    autonomous_deployments = serializers.BooleanField(read_only=True, help_text=(
        "whether the project pre-authorized deployment_approval:approve (its deployments without a hold are "
        "approved when their gate opens)"))

    class Meta:
        model = Project
        fields = ["id", "organization", "name", "slug", "repo_url", "autonomous_deployments", "created_at"]
