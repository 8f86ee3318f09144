"""Conversations with the assistant and the approval requests its mutating tools make (ADR 36), over the API.

Thin like lifecycle/api/views.py: a view checks what the caller may see (other people's conversations and other
organizations' rows are 404), validates the input, calls one service, serializes. A question is answered on a
worker: the POST answers 201 with the answer `pending`; poll the conversation or its messages until it is `done`.
"""
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response

from lifecycle.actors import Actor
from lifecycle.api.serializers import ErrorOut, StrictCharField, StrictSerializer
from lifecycle.errors import DomainError
from lifecycle.models import ActionApproval, Conversation, Message, Organization, ToolCall
from lifecycle.selectors import requirements_visible_to
from lifecycle.services.approvals import REASON_MAX_CHARS, approval_decide, approvals_to_decide, approvals_visible_to
from lifecycle.services.conversations import (
    TEXT_MAX_CHARS,
    conversation_start,
    mark_read,
    message_post,
    visible_conversations,
)

CONFLICT = OpenApiResponse(ErrorOut, description="the request was decided already")


class ConversationIn(StrictSerializer):
    text = StrictCharField(max_length=TEXT_MAX_CHARS, help_text="the question")
    requirement = serializers.UUIDField(required=False, help_text="ask about this requirement (its organization's)")
    organization = serializers.UUIDField(required=False, help_text="needed without a requirement when you belong "
                                         "to several organizations")


class MessageIn(StrictSerializer):
    text = StrictCharField(max_length=TEXT_MAX_CHARS)


class ApprovalDecisionIn(StrictSerializer):
    reason = StrictCharField(max_length=REASON_MAX_CHARS, required=False, allow_blank=True, default="",
                             help_text="why (recorded in the approval's audit and said in the conversation)")


class ToolCallOut(serializers.ModelSerializer):
    approval = serializers.SerializerMethodField(help_text="the approval request a mutating tool made")

    class Meta:
        model = ToolCall
        fields = ["specialist", "tool", "kind", "arguments", "result", "status", "approval", "created_at"]

    @extend_schema_field(serializers.UUIDField(allow_null=True))
    def get_approval(self, call) -> str | None:
        approval = getattr(call, "approval", None)
        return str(approval.pk) if approval is not None else None


class MessageOut(serializers.ModelSerializer):
    user = serializers.StringRelatedField(allow_null=True, help_text="the person who wrote it (a person's message)")
    route = serializers.JSONField(help_text="the specialists the supervisor chose and why (an answer's)")
    tool_calls = ToolCallOut(many=True, read_only=True, help_text="each tool a specialist called for this answer")

    class Meta:
        model = Message
        fields = ["id", "seq", "author", "user", "channel", "text", "state", "error", "route", "tool_calls",
                  "created_at", "answered_at"]


class SummaryOut(serializers.Serializer):
    """The earlier turns, folded by the assistant: shown as a summary, not as the messages themselves."""

    text = serializers.CharField()
    through_seq = serializers.IntegerField(help_text="the last message seq the summary covers")


class ConversationSummaryOut(serializers.ModelSerializer):
    organization = serializers.UUIDField(source="organization_id")
    requirement = serializers.UUIDField(source="requirement_id", allow_null=True)
    started_by = serializers.StringRelatedField(allow_null=True, help_text="empty: the system started it")

    class Meta:
        model = Conversation
        fields = ["id", "title", "organization", "requirement", "started_by", "event", "created_at", "updated_at"]


class ConversationOut(ConversationSummaryOut):
    summary = serializers.SerializerMethodField()
    messages = MessageOut(many=True, read_only=True)

    class Meta(ConversationSummaryOut.Meta):
        fields = [*ConversationSummaryOut.Meta.fields, "summary", "messages"]

    @extend_schema_field(SummaryOut(allow_null=True))
    def get_summary(self, conversation) -> dict | None:
        if not conversation.summary:
            return None
        return {"text": conversation.summary, "through_seq": conversation.summary_through}


class ConversationStartedOut(ConversationSummaryOut):
    answer = MessageOut(help_text="the answer, `pending` until a worker writes it")

    class Meta(ConversationSummaryOut.Meta):
        fields = [*ConversationSummaryOut.Meta.fields, "answer"]


class ApprovalOut(serializers.ModelSerializer):
    organization = serializers.UUIDField(source="organization_id")
    project = serializers.UUIDField(source="project_id", allow_null=True)
    conversation = serializers.UUIDField(source="conversation_id", allow_null=True)
    requested_for = serializers.StringRelatedField(allow_null=True)
    decided_by = serializers.StringRelatedField(allow_null=True)
    preauthorized = serializers.SerializerMethodField(help_text="run at once under the project's pre-authorization")
    proposed = serializers.DictField(child=serializers.CharField(), read_only=True, help_text=(
        "what approving records as the approver's own words, as the assistant wrote them (untrusted text): "
        "`feedback`, `constraint`, `budget` (the new limits, as JSON), `reason`; those given"))

    class Meta:
        model = ActionApproval
        fields = ["id", "organization", "project", "conversation", "action", "summary", "proposed", "arguments", "state",
                  "requested_for", "decided_by", "decided_via", "decided_at", "reason", "preauthorized", "result",
                  "created_at"]

    def get_preauthorized(self, approval) -> bool:
        return approval.preauthorization_id is not None


def _messages(conversation_rows):
    return conversation_rows.prefetch_related("tool_calls__approval").select_related("user")


class ConversationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The caller's conversations (those they take part in); another person's or organization's is 404."""

    serializer_class = ConversationOut
    submission_actions = ("create", "messages")  # each POST queues model calls: the tighter rate limit (not a GET)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Conversation.objects.none()
        rows = visible_conversations(self.request.user).select_related("started_by")
        if self.action == "retrieve":
            return rows.prefetch_related("messages__user", "messages__tool_calls__approval")
        return rows

    def get_serializer_class(self):
        return ConversationSummaryOut if self.action == "list" else ConversationOut

    def retrieve(self, request, pk=None):
        """The conversation: its summary (the earlier turns folded, if any) and its messages; reading it marks
        them read."""
        conversation = get_object_or_404(self.get_queryset(), pk=pk)
        mark_read(conversation, request.user)
        return Response(ConversationOut(conversation).data)

    @extend_schema(request=ConversationIn, responses={201: ConversationStartedOut})
    def create(self, request):
        """Ask a question (about a requirement, or about your organization's work): the conversation and the
        answer, `pending` until a worker writes it."""
        data = ConversationIn(data=request.data)
        data.is_valid(raise_exception=True)
        given = data.validated_data
        requirement, organization = None, None  # another organization's is "no such", as a project is on submit
        if "requirement" in given:
            requirement = requirements_visible_to(request.user).select_related("organization").filter(
                pk=given["requirement"]).first()
            if requirement is None:
                raise DomainError("no such requirement", "requirement")
            organization = requirement.organization
        if "organization" in given:
            organization = Organization.objects.filter(memberships__user=request.user, pk=given["organization"]).first()
            if organization is None:
                raise DomainError("no such organization", "organization")
            if requirement is not None and requirement.organization_id != organization.pk:
                raise DomainError("that requirement is not in this organization", "requirement")
        if organization is None:
            organization = _only_organization(request.user)
        conversation, answer = conversation_start(actor=Actor.human(request.user, "api"), organization=organization,
                                                  requirement=requirement, text=given["text"], channel="api")
        conversation.answer = answer
        return Response(ConversationStartedOut(conversation).data, status=status.HTTP_201_CREATED,
                        headers={"Location": f"{request.path}{conversation.pk}/"})

    @extend_schema(methods=["get"], request=None, responses={200: MessageOut(many=True)})
    @extend_schema(methods=["post"], request=MessageIn, responses={201: MessageOut})
    @action(detail=True, methods=["get", "post"])
    def messages(self, request, pk=None):
        """GET: the messages, oldest first (paged). POST: the next question; answers 201 with the pending answer."""
        conversation = get_object_or_404(self.get_queryset(), pk=pk)
        if request.method == "GET":
            page = self.paginate_queryset(_messages(conversation.messages.order_by("seq")))
            return self.get_paginated_response(MessageOut(page, many=True).data)
        data = MessageIn(data=request.data)
        data.is_valid(raise_exception=True)
        answer = message_post(conversation_id=conversation.pk, actor=Actor.human(request.user, "api"),
                              text=data.validated_data["text"], channel="api")
        return Response(MessageOut(answer).data, status=status.HTTP_201_CREATED)


class ApprovalViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Actions the assistant asked for. The list holds the pending ones the caller may decide; any of the
    caller's organizations' requests can be read by id (its audit)."""

    serializer_class = ApprovalOut
    submission_actions = ("approve", "reject")  # a review decision or a cancel, as review-tasks' decision is

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ActionApproval.objects.none()
        return approvals_visible_to(self.request.user).select_related("requested_for", "decided_by")

    def list(self, request):
        """Pending approval requests you may decide, newest first."""
        page = self.paginate_queryset(approvals_to_decide(request.user))
        return self.get_paginated_response(ApprovalOut(page, many=True).data)

    @extend_schema(request=ApprovalDecisionIn, responses={200: ApprovalOut, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """Approve: the action runs now, as you (with your permissions); its `result` says what came of it."""
        return self._decide(request, pk, approve=True)

    @extend_schema(request=ApprovalDecisionIn, responses={200: ApprovalOut, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        """Reject, with an optional reason: nothing runs."""
        return self._decide(request, pk, approve=False)

    def _decide(self, request, pk, *, approve: bool) -> Response:
        approval = get_object_or_404(self.get_queryset(), pk=pk)
        data = ApprovalDecisionIn(data=request.data)
        data.is_valid(raise_exception=True)
        decided = approval_decide(approval_id=approval.pk, actor=Actor.human(request.user, "api"), approve=approve,
                                  reason=data.validated_data["reason"])
        return Response(ApprovalOut(decided).data)


def _only_organization(user) -> Organization:
    organizations = list(Organization.objects.filter(memberships__user=user)[:2])
    if len(organizations) != 1:
        raise DomainError("say which organization (you belong to several)" if organizations
                          else "you are a member of no organization", "organization")
    return organizations[0]

