"""The Django admin as the review inbox. Decision buttons call the same service as the API,
which checks the reviewer role itself (django-fsm-2's admin mixin would not)."""
from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import (
    Artifact,
    LLMCall,
    Membership,
    Organization,
    OutboxEvent,
    Project,
    Requirement,
    ReviewTask,
    StateTransition,
    Step,
    UserStory,
)
from lifecycle.services.reviews import review_decide
from lifecycle.states import Decision


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=Decision.choices)
    reason = forms.CharField(required=False)
    feedback = forms.CharField(required=False)
    answer = forms.CharField(required=False)


def render_stories(stories) -> str:
    """Stories with their acceptance criteria, escaped: model output is never trusted as HTML."""
    return format_html_join(
        "", "<div class='story'><h4>{}</h4><p>As a {}, I want {}, so that {}.</p>"
        "<p><b>Priority</b> {} · <b>Points</b> {}</p><ul>{}</ul></div>",
        (
            (st["title"], st["as_a"], st["i_want"], st["so_that"], st["priority"], st["story_points"],
             format_html_join("", "<li>{}</li>", ((c,) for c in st["acceptance_criteria"])))
            for st in stories
        ),
    )


class MemberAccess:
    """Admin access follows organization membership, not Django model permissions:
    a staff member sees their organizations' rows; what they may decide, the service checks."""

    def _member(self, request) -> bool:
        user = request.user
        return user.is_active and user.is_staff and (user.is_superuser or user.memberships.exists())

    def has_module_permission(self, request):
        return self._member(request)

    def has_view_permission(self, request, obj=None):
        return self._member(request)

    def has_change_permission(self, request, obj=None):
        return False  # rows change through services only (decision buttons, API)

    def has_delete_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False

    def get_queryset(self, request):
        rows = super().get_queryset(request)
        return rows if request.user.is_superuser else rows.filter(organization__memberships__user=request.user)


@admin.register(ReviewTask)
class ReviewTaskAdmin(MemberAccess, admin.ModelAdmin):
    list_display = ["kind", "requirement", "round", "state", "decision", "sla_deadline", "assignee", "created_at"]
    list_filter = ["state", "kind", "organization"]
    list_select_related = ["requirement", "assignee"]
    search_fields = ["question", "requirement__title"]
    change_form_template = "admin/lifecycle/reviewtask/change_form.html"
    fieldsets = [
        ("What is asked", {"fields": ["requirement", "question", "reasoning", "pinned_context"]}),
        ("Task", {"fields": ["kind", "round", "state", "sla_deadline", "assignee", "organization", "created_at"]}),
        ("Decision", {"fields": ["decision", "reason", "feedback", "decided_by", "decided_by_policy", "decided_via",
                                 "decided_at"]}),
    ]
    readonly_fields = [f for _, section in fieldsets for f in section["fields"]]

    @admin.display(description="context")
    def pinned_context(self, task):
        if task.context.get("stories"):
            return render_stories(task.context["stories"])
        return format_html("<pre>{}</pre>", task.context)

    def get_urls(self):
        decide = self.admin_site.admin_view(self.decide_view)
        return [path("<uuid:pk>/decide/", decide, name="lifecycle_reviewtask_decide"), *super().get_urls()]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra = {"decide_url": reverse("admin:lifecycle_reviewtask_decide", args=[object_id])}
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), **extra})

    def decide_view(self, request, pk):
        if request.method != "POST":
            raise PermissionDenied
        task = get_object_or_404(self.get_queryset(request), pk=pk)
        form = DecisionForm(request.POST)
        if not form.is_valid():
            messages.error(request, f"invalid decision: {form.errors.as_text()}")
        else:
            try:
                review_decide(task_id=task.pk, actor=Actor.human(request.user, "admin"), **form.cleaned_data)
                messages.success(request, f"{task}: {form.cleaned_data['decision']} recorded")
            except (DomainError, IllegalTransition, NotPermitted) as exc:
                messages.error(request, str(exc))
        return redirect("admin:lifecycle_reviewtask_change", task.pk)


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_view_permission(self, request, obj=None):
        return True  # shown only inside a change view the parent admin already allowed

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class StoryInline(ReadOnlyInline):
    model = UserStory
    fields = ["round", "position", "title", "priority", "story_points", "state", "acceptance_criteria"]
    readonly_fields = fields


class TransitionInline(ReadOnlyInline):
    model = StateTransition
    fields = ["created_at", "subject", "event", "from_state", "to_state", "actor_role", "actor_user", "via", "guard"]
    readonly_fields = fields


@admin.register(Requirement)
class RequirementAdmin(MemberAccess, admin.ModelAdmin):
    list_display = ["__str__", "project", "state", "created_at"]
    list_filter = ["state", "organization"]
    search_fields = ["title", "brief"]
    readonly_fields = ["state", "story_round", "clarification_round", "dev_attempts", "clarifications", "created_at"]
    inlines = [StoryInline, TransitionInline]


for model in (Organization, Membership, Project, Artifact, OutboxEvent, Step, LLMCall):
    admin.site.register(model)
