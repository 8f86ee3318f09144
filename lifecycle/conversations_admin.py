"""Conversations in the admin (ADR 36): the person's conversations, a conversation's page (its summary, its messages
with each answer's route and tool calls, the approval requests waiting there), the "Ask about this requirement"
panel on a requirement's page, approval requests (their audit) and the projects' pre-authorizations.

A question is answered on a worker: the page posts it with fetch and polls the conversation's messages (an HTML
fragment, rendered and escaped by the same template as the page) until no answer is pending, without a reload.
Every POST calls one service as the signed-in person; the services check who may do what.
"""
from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from lifecycle.actors import Actor
from lifecycle.admin_access import is_member, member_roles
from lifecycle.admin_links import ViewableLinks
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import (
    ActionApproval,
    ActionPreauthorization,
    Conversation,
    Membership,
    Message,
    Project,
    Requirement,
)
from lifecycle.services.approvals import (
    action_types,
    approval_decide,
    approvals_visible_to,
    may_decide,
    preauthorization_revoke,
    preauthorize,
)
from lifecycle.services.conversations import conversation_start, mark_read, message_post, visible_conversations
from lifecycle.states import Role

REFUSED = (DomainError, IllegalTransition, NotPermitted)
UNANSWERED = (Message.State.PENDING, Message.State.ANSWERING)


class StaffMember(ViewableLinks):
    """Staff who belong to an organization see these pages; the rows shown are theirs (see get_queryset)."""

    def has_module_permission(self, request):
        return is_member(request)

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Conversation)
class ConversationAdmin(StaffMember, admin.ModelAdmin):
    """The conversations the signed-in person takes part in (a superuser too: a conversation is its
    participants')."""

    list_display = ["title", "requirement", "started", "updated_at"]
    list_select_related = ["requirement", "started_by"]
    search_fields = ["title"]

    def get_queryset(self, request):
        return visible_conversations(request.user)

    @admin.display(description="started by")
    def started(self, conversation):
        return conversation.started_by or format_html("<i>the team</i> ({})", conversation.event or "an event")

    def change_view(self, request, object_id, form_url="", extra_context=None):
        conversation = self._conversation(request, object_id)
        mark_read(conversation, request.user)
        return TemplateResponse(request, "admin/lifecycle/conversation/conversation.html", {
            **self.admin_site.each_context(request), "opts": Conversation._meta, "title": conversation.title,
            "conversation": conversation, **thread(request, conversation)})

    def get_urls(self):
        def mount(route: str, view, name: str):
            return path(route, self.admin_site.admin_view(lambda request, **kw: view(self, request, **kw)),
                        name=f"lifecycle_conversation_{name}")

        return [
            mount("ask/", ask, "ask"),
            mount("<uuid:pk>/messages/", messages_fragment, "messages"),
            mount("<uuid:pk>/post/", post, "post"),
            mount("approvals/<uuid:pk>/decide/", decide, "decide"),
            *super().get_urls(),
        ]

    def _conversation(self, request: HttpRequest, pk: Any) -> Conversation:
        rows = self.get_queryset(request).select_related("requirement", "started_by")
        try:
            return get_object_or_404(rows, pk=pk)
        except ValidationError:  # not a UUID
            raise Http404("no such conversation") from None


def thread(request: HttpRequest, conversation: Conversation) -> dict[str, Any]:
    """What the messages fragment shows: the summary, the messages with their tool calls, the approval requests
    waiting in the conversation (with buttons for whoever may decide them), and whether an answer is still due."""
    rows = list(conversation.messages.select_related("user").prefetch_related("tool_calls__approval"))
    waiting = [(approval, may_decide(request.user, approval)) for approval in
               conversation.approvals.filter(state=ActionApproval.State.PENDING).select_related("organization")]
    return {"conversation": conversation, "rows": rows, "waiting": waiting,
            "answering": any(row.state in UNANSWERED for row in rows),
            "messages_url": reverse("admin:lifecycle_conversation_messages", args=[conversation.pk]),
            "post_url": reverse("admin:lifecycle_conversation_post", args=[conversation.pk]),
            "page_url": reverse("admin:lifecycle_conversation_change", args=[conversation.pk])}


def _fragment(request: HttpRequest, conversation: Conversation, status: int = 200) -> JsonResponse:
    """The thread for fetch; what it shows counts as read."""
    mark_read(conversation, request.user)
    context = thread(request, conversation)
    html = render_to_string("admin/lifecycle/conversation/_thread.html", context, request=request)
    return JsonResponse({"answering": context["answering"], "html": html, "page": context["page_url"],
                         "messages": context["messages_url"], "post": context["post_url"]}, status=status)


def messages_fragment(model_admin: ConversationAdmin, request: HttpRequest, pk: Any) -> HttpResponse:
    """The poll: the thread as HTML (escaped by the template) and whether an answer is still being written."""
    if request.method != "GET":
        return HttpResponseNotAllowed(["GET"])
    return _fragment(request, model_admin._conversation(request, pk))


def ask(model_admin: ConversationAdmin, request: HttpRequest) -> HttpResponse:
    """The requirement panel's first question: a new conversation about the requirement."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    requirement = _requirement(request, request.POST.get("requirement", ""))
    try:
        conversation, _ = conversation_start(actor=Actor.human(request.user, "web"), text=request.POST.get("text", ""),
                                             organization=requirement.organization, requirement=requirement)
    except REFUSED as exc:
        return _refused(request, exc, reverse("admin:lifecycle_requirement_change", args=[requirement.pk]))
    return _answered(request, conversation, status=201)


def post(model_admin: ConversationAdmin, request: HttpRequest, pk: Any) -> HttpResponse:
    """The next question in a conversation."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    conversation = model_admin._conversation(request, pk)
    try:
        message_post(conversation_id=conversation.pk, actor=Actor.human(request.user, "web"),
                     text=request.POST.get("text", ""))
    except REFUSED as exc:
        return _refused(request, exc, reverse("admin:lifecycle_conversation_change", args=[conversation.pk]))
    return _answered(request, conversation, status=201)


def decide(model_admin: ConversationAdmin, request: HttpRequest, pk: Any) -> HttpResponse:
    """Approve (the action runs as the signed-in person) or reject an approval request, then back to its
    conversation."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    approval = get_object_or_404(approvals_visible_to(request.user), pk=pk)
    back = (reverse("admin:lifecycle_conversation_change", args=[approval.conversation_id])
            if approval.conversation_id else reverse("admin:lifecycle_actionapproval_changelist"))
    try:
        decided = approval_decide(approval_id=approval.pk, actor=Actor.human(request.user, "admin"),
                                  approve=request.POST.get("decision") == "approve", reason=request.POST.get("reason", ""))
    except REFUSED as exc:
        messages.error(request, f"not decided: {exc}")
        return redirect(back)
    level = messages.ERROR if decided.state == ActionApproval.State.FAILED else messages.SUCCESS
    messages.add_message(request, level, f"{decided.summary}: {decided.state}" +
                         (f" ({decided.result})" if decided.result else ""))
    return redirect(back)


def _requirement(request: HttpRequest, pk: str) -> Requirement:
    rows = Requirement.objects.select_related("organization").filter(organization__memberships__user=request.user)
    try:
        return get_object_or_404(rows, pk=pk)
    except ValidationError:
        raise Http404("no such requirement") from None


def _answered(request: HttpRequest, conversation: Conversation, *, status: int) -> HttpResponse:
    """fetch gets the thread to show and poll; a form posted without script goes to the conversation's page."""
    if _wants_json(request):
        return _fragment(request, conversation, status=status)
    return redirect("admin:lifecycle_conversation_change", conversation.pk)


def _refused(request: HttpRequest, exc: Exception, back: str) -> HttpResponse:
    status = 403 if isinstance(exc, NotPermitted) else 409 if isinstance(exc, IllegalTransition) else 400
    if _wants_json(request):
        return JsonResponse({"error": str(exc)}, status=status)
    messages.error(request, str(exc))
    return redirect(back)


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


@admin.register(ActionApproval)
class ActionApprovalAdmin(StaffMember, admin.ModelAdmin):
    """Every action the assistant asked for in the person's organizations: who asked, who decided, how, and what
    came of it (the audit). Deciding is on the conversation's page, or over the API or Slack."""

    list_display = ["created_at", "summary", "action", "state", "requested_for", "decided_by", "decided_via",
                    "conversation_link"]
    list_filter = ["state", "action"]
    list_select_related = ["requested_for", "decided_by"]
    fields = ["created_at", "summary", "action", "arguments", "state", "requested_for", "decided_by", "decided_via",
              "decided_at", "reason", "preauthorization", "result", "conversation_link"]
    readonly_fields = fields

    def get_queryset(self, request):
        return approvals_visible_to(request.user)

    @admin.display(description="conversation")
    def conversation_link(self, approval):
        if not approval.conversation_id:
            return "—"
        return format_html('<a href="{}">open</a>',
                           reverse("admin:lifecycle_conversation_change", args=[approval.conversation_id]))


def _admin_projects(user) -> Any:
    return Project.objects.filter(organization__memberships__user=user, organization__memberships__role=Role.ADMIN)


class PreauthorizationForm(forms.ModelForm):
    action = forms.ChoiceField(choices=action_types, help_text=(
        "exactly this action type runs without a second confirmation when the assistant asks for it, as the person "
        "who asked, with their permissions. stories_approval:approve and deployment_approval:approve also approve "
        "their gate when it opens; a deployment that changes CI workflows or was flagged by the scope guard still "
        "waits for a person"))

    class Meta:
        model = ActionPreauthorization
        fields = ["project", "action"]


@admin.register(ActionPreauthorization)
class ActionPreauthorizationAdmin(StaffMember, admin.ModelAdmin):
    """Action types a project lets the assistant run at once when asked there, and the two gates it approves when
    they open (ADR 36). The organization's admins grant and withdraw them; its other members see them."""

    form = PreauthorizationForm
    actions = None  # withdrawn one at a time, on its page, where the admin check applies
    list_display = ["project", "action", "granted_by", "created_at"]
    list_filter = [("project", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["project", "granted_by"]

    def get_queryset(self, request):
        return super().get_queryset(request).filter(project__organization__memberships__user=request.user)

    def has_add_permission(self, request):
        """Only an organization's admins grant (a superuser too must be one): the "Add" link is hidden from the others.
        Asked by every admin page's menu: answered from the roles already read for it."""
        return self.has_module_permission(request) and Role.ADMIN in member_roles(request)

    def has_delete_permission(self, request, obj=None):
        if not self.has_module_permission(request):
            return False
        return obj is None or Membership.objects.filter(user=request.user, organization_id=obj.project.organization_id,
                                                        role=Role.ADMIN).exists()

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "project":
            kwargs["queryset"] = _admin_projects(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):
        grant = preauthorize(project=obj.project, action=obj.action, actor=Actor.human(request.user, "admin"))
        obj.pk, obj.granted_by, obj.created_at = grant.pk, grant.granted_by, grant.created_at

    def delete_model(self, request, obj):
        preauthorization_revoke(project=obj.project, action=obj.action, actor=Actor.human(request.user, "admin"))
