"""Input serializers (strict: unknown fields and wrong types are 400) and output serializers."""
from django.conf import settings
from django.db.models import Sum
from rest_framework import serializers

from lifecycle.models import Artifact, Project, Requirement, RequirementDoc, ReviewTask, StateTransition, UserStory
from lifecycle.services.artifacts import content_json, latest
from lifecycle.states import ArtifactKind, Decision


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers, booleans, lists: a brief must be a string."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictSerializer(serializers.Serializer):
    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({name: ["unknown field"] for name in unknown})
        return attrs


class RequirementIn(StrictSerializer):
    brief = StrictCharField(max_length=settings.AITEAM_BRIEF_MAX_CHARS, trim_whitespace=True)
    title = StrictCharField(max_length=200, required=False, allow_blank=True, default="")
    project = serializers.UUIDField(required=False)


class DecisionIn(StrictSerializer):
    decision = serializers.ChoiceField(choices=Decision.choices)
    reason = StrictCharField(max_length=4000, required=False, allow_blank=True, default="")
    feedback = StrictCharField(max_length=8000, required=False, allow_blank=True, default="")
    answer = StrictCharField(max_length=8000, required=False, allow_blank=True, default="")


class DocOut(serializers.ModelSerializer):
    class Meta:
        model = RequirementDoc
        fields = ["version", "summary", "objectives", "out_of_scope", "assumptions", "constraints", "success_metrics"]


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


class TransitionOut(serializers.ModelSerializer):
    actor_user = serializers.StringRelatedField()

    class Meta:
        model = StateTransition
        fields = ["subject", "subject_id", "event", "from_state", "to_state", "actor_role", "actor_user", "via",
                  "guard", "metadata", "created_at"]


class ReviewTaskOut(serializers.ModelSerializer):
    requirement = serializers.UUIDField(source="requirement_id")
    decided_by = serializers.StringRelatedField()
    assignee = serializers.StringRelatedField()
    assignee_group = serializers.StringRelatedField()

    class Meta:
        model = ReviewTask
        fields = ["id", "requirement", "kind", "round", "state", "question", "reasoning", "context", "options",
                  "decision", "reason", "feedback", "decided_by", "decided_by_policy", "decided_via", "decided_at",
                  "sla_deadline", "assignee", "created_at",
                  "assignee_group", "escalation_policy", "decide_by", "escalation_count", "policy"]


class RequirementSummaryOut(serializers.ModelSerializer):
    project = serializers.UUIDField(source="project_id")
    prompt_bundle = serializers.CharField(source="prompt_bundle_id", allow_null=True)

    class Meta:
        model = Requirement
        fields = ["id", "title", "state", "project", "playbook", "prompt_bundle", "created_at", "state_changed_at"]


class RequirementOut(RequirementSummaryOut):
    brief = serializers.CharField()
    requirement_doc = serializers.SerializerMethodField()
    stories = StoryOut(many=True)
    artifacts = ArtifactOut(many=True)
    transitions = TransitionOut(many=True)
    open_review_tasks = serializers.SerializerMethodField()
    llm_usage = serializers.SerializerMethodField()
    status_digest = serializers.SerializerMethodField()

    class Meta(RequirementSummaryOut.Meta):
        fields = [*RequirementSummaryOut.Meta.fields, "brief", "clarifications", "requirement_doc", "stories",
                  "artifacts", "transitions", "open_review_tasks", "llm_usage", "status_digest"]

    def get_requirement_doc(self, obj):
        doc = obj.docs.order_by("-version").first()
        return DocOut(doc).data if doc else None

    def get_open_review_tasks(self, obj):
        return ReviewTaskOut(obj.review_tasks.pending(), many=True).data

    def get_status_digest(self, obj):
        digest = latest(obj, ArtifactKind.STATUS_DIGEST, "digest")
        return {"updated_at": digest.created_at, **content_json(digest)} if digest else None

    def get_llm_usage(self, obj):
        totals = obj.llm_calls.aggregate(
            input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"),
            cache_read_tokens=Sum("cache_read_tokens"), cost_usd=Sum("cost_usd"),
        )
        return {"calls": obj.llm_calls.count(), **{k: v or 0 for k, v in totals.items()}}


class ProjectRef(serializers.ModelSerializer):
    class Meta:
        model = Project
        fields = ["id", "name"]
