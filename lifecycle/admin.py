"""The Django admin: the review inbox, requirements, projects (with their review settings).

Decision, claim and assignment buttons call the same services as the API and the SLA
sweeper; those check the reviewer permission themselves (django-fsm-2's admin mixin would not).
"""
import json

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db.models import Count, Q
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import path
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from lifecycle import (  # noqa: F401  (admins)
    conversation_email_admin,
    conversations_admin,
    meta_eval_admin,
    promotions_admin,
    slack_admin,
    tokens_admin,
)
from lifecycle.actors import Actor
from lifecycle.admin_access import is_member
from lifecycle.admin_links import ViewableLinks
from lifecycle.api.parsers import BoundedJSONFormField
from lifecycle.budget_limits import DIMENSIONS
from lifecycle.budget_limits import problems as budget_problems
from lifecycle.budget_limits import shape_problems as budget_shape_problems
from lifecycle.inbox import columns, filters, views
from lifecycle.models import (
    Artifact,
    FailureRoute,
    LLMCall,
    Membership,
    Notification,
    Organization,
    OutboxEvent,
    Project,
    Requirement,
    ReviewTask,
    StateTransition,
    Step,
    StoryEdit,
    UserStory,
    WebhookDelivery,
)
from lifecycle.models.tenancy import WEBHOOK_SOURCES
from lifecycle.notifications.slack import slack_channel_problems
from lifecycle.notifications.webhook import url_problem
from lifecycle.origin import request_origin
from lifecycle.playbooks import table_problems
from lifecycle.replay.admin import ReplayAdminMixin
from lifecycle.repo_settings import moved_settings, repository_settings_problems, token_envs_named
from lifecycle.selectors import secret_env_shared, token_env_refusal
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.assignment import review_claim, review_unassign
from lifecycle.services.budgets import budget_report, cell_text
from lifecycle.services.promotions import guarded_settings_problems, project_settings_save, promotions_to_decide
from lifecycle.services.repositories import tenant_remote
from lifecycle.services.sla import policy_contacts_refused
from lifecycle.services.sla_policies import policy_problems
from lifecycle.states import ArtifactKind, Decision, ReviewState, Role

REPOSITORY_FIELDS = ["repo_url", "base_branch", "host_kind", "token_env", "webhook_label", "github_webhook_secret_env",
                     "gitlab_webhook_secret_env", "jira_webhook_secret_env"]
WEBHOOK_MASK = "•••• (shown to the organization's admins only)"


class MemberAccess(ViewableLinks):
    """Admin access follows organization membership, not Django model permissions:
    a staff member sees their organizations' rows; what they may decide, the service checks."""

    def has_module_permission(self, request):
        return is_member(request)

    def has_view_permission(self, request, obj=None):
        return is_member(request)

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
    """The review inbox: pending tasks first by SLA, filters, claim/unassign, bulk decisions, the review page."""

    list_filter = [filters.StatusFilter, filters.AssignmentFilter, filters.AttentionFilter, "kind", filters.ProjectFilter]
    list_select_related = ["requirement__project__organization", "assignee", "assignee_group"]
    search_fields = ["question", "requirement__title"]
    list_per_page = 50
    show_full_result_count = False  # one count query, not two
    change_list_template = "admin/lifecycle/reviewtask/change_list.html"
    actions = ["claim_selected", "unassign_selected", "approve_selected", "reject_selected"]

    def get_list_display(self, request):
        return [columns.task_label, columns.requirement_label, columns.state_label,
                columns.assigned_label, columns.sla_label, columns.age_label, columns.row_actions_for(request.user)]

    def get_list_display_links(self, request, list_display):
        return [columns.task_label]

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {**(extra_context or {}), "inbox_counts": self._counts(request),
                                                 "promotions_waiting": promotions_to_decide(request.user).count()})

    def _counts(self, request) -> dict[str, int]:
        """The quick-filter badges, in one query whatever the number of tasks."""
        user, now = request.user, timezone.now()
        return self.get_queryset(request).pending().of_real_runs().aggregate(
            mine=Count("pk", filter=Q(assignee=user)), unassigned=Count("pk", filter=Q(assignee=None, assignee_group=None)),
            overdue=Count("pk", filter=Q(sla_deadline__lt=now)), escalated=Count("pk", filter=Q(state=ReviewState.ESCALATED)),
        )

    def change_view(self, request, object_id, form_url="", extra_context=None):
        rows = self.get_queryset(request).select_related(
            "organization", "requirement__project__organization", "assignee", "assignee_group", "decided_by")
        try:
            task = get_object_or_404(rows, pk=object_id)
        except ValidationError:  # not a UUID: no such task either
            raise Http404("no such review task") from None
        return views.review_page(self, request, task)

    def get_urls(self):
        def mount(route: str, view, name: str):
            wrapped = views.post_only(view)
            return path(route, self.admin_site.admin_view(lambda request, **kw: wrapped(self, request, **kw)),
                        name=f"lifecycle_reviewtask_{name}")

        return [
            mount("<uuid:pk>/decide/", views.decide, "decide"),
            mount("<uuid:pk>/claim/", views.claim, "claim"),
            mount("<uuid:pk>/unassign/", views.unassign, "unassign"),
            mount("<uuid:pk>/assign/", views.assign, "assign"),
            mount("<uuid:pk>/stories/<uuid:story_pk>/", views.edit_story, "edit_story"),
            *super().get_urls(),
        ]

    @admin.action(description="Claim selected tasks")
    def claim_selected(self, request, queryset):
        self._each(request, queryset, review_claim, "claimed")

    @admin.action(description="Unassign selected tasks")
    def unassign_selected(self, request, queryset):
        self._each(request, queryset, review_unassign, "unassigned")

    @admin.action(description="Approve selected tasks…")
    def approve_selected(self, request, queryset):
        return views.bulk_decide(self, request, queryset, Decision.APPROVE)

    @admin.action(description="Reject selected tasks with one reason…")
    def reject_selected(self, request, queryset):
        return views.bulk_decide(self, request, queryset, Decision.REJECT)

    def _each(self, request, queryset, service, done: str) -> None:
        actor, origin = Actor.human(request.user, "admin"), request_origin(request)
        count = sum(views.run_service(request, lambda t=t: service(task_id=t.pk, actor=actor, origin=origin), "", about=t)
                    for t in queryset)
        self.message_user(request, f"{count} task(s) {done}")


class ReadOnlyInline(ViewableLinks, admin.TabularInline):
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

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("actor_user")


def routing_trace(route: FailureRoute) -> str:
    """Every rule the classifier evaluated, in order: ✔ matched (the first one decided), · did not."""
    rows = ((("✔" if step["matched"] else "·"), step["rule"], step["route"], step["because"]) for step in route.trace)
    return format_html("<ol>{}</ol>", format_html_join("", "<li>{} {} → {}: {}</li>", rows))


class FailureRouteInline(ReadOnlyInline):
    model = FailureRoute
    verbose_name_plural = "failure routing (classifier trace)"
    fields = ["created_at", "source", "route", "rule", "summary", "action", "trace_display"]
    readonly_fields = fields

    @admin.display(description="trace")
    def trace_display(self, route):
        return routing_trace(route)


@admin.register(FailureRoute)
class FailureRouteAdmin(MemberAccess, admin.ModelAdmin):
    """Every routed failure across your organizations: filter by route, source or deciding rule."""

    list_display = ["created_at", "requirement", "source", "route", "rule", "summary", "action"]
    list_filter = ["route", "source", "rule"]
    list_select_related = ["requirement"]
    search_fields = ["summary", "requirement__title"]
    fields = ["created_at", "requirement", "step", "source", "route", "rule", "matched", "summary", "signature",
              "action", "trace_display", "facts"]
    readonly_fields = fields

    @admin.display(description="trace")
    def trace_display(self, route):
        return routing_trace(route)


@admin.register(Requirement)
class RequirementAdmin(ReplayAdminMixin, MemberAccess, admin.ModelAdmin):
    list_display = ["__str__", "project", "playbook", "state", "ticket_key", "created_at"]
    list_filter = ["state", "playbook", "ticket_source", ("organization", admin.RelatedOnlyFieldListFilter)]  # not every tenant
    search_fields = ["title", "brief", "ticket_key"]
    readonly_fields = ["state", "playbook", "ticket_source", "ticket_key", "ticket_url", "prompt_bundle", "status_digest",
                       "story_round", "clarification_round", "design_round", "dev_attempts", "code_review_round",
                       "clarifications", "created_at", "budget_standing"]
    inlines = [StoryInline, TransitionInline, FailureRouteInline]

    @admin.display(description="budget: spent / limit (remaining)")
    def budget_standing(self, requirement):
        """Spend against limits per scope and dimension; escaped, never |safe."""
        report = budget_report(requirement)
        rows = ((scope, *(cell_text(report["standing"][scope][d]) for d in DIMENSIONS)) for scope in report["standing"])
        head = format_html("<tr><th>scope</th>{}</tr>", format_html_join("", "<th>{}</th>", ((d,) for d in DIMENSIONS)))
        body = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", rows)
        notes = format_html_join("", "<li>constraint: {}</li>", ((c,) for c in report["constraints"]))
        paused = format_html("<p><b>Paused</b> in {} until the budget task is decided.</p>", report["paused_from"]) \
            if report["exhausted"] else ""
        return format_html("{}<table>{}{}</table><ul>{}</ul>", paused, head, body, notes)

    @admin.display(description="PM status digest")
    def status_digest(self, requirement):
        """The project manager's latest digest: headline, blockers, loops and spend (escaped, never |safe)."""
        digest = latest(requirement, ArtifactKind.STATUS_DIGEST, "digest")
        if digest is None:
            return "—"
        facts = content_json(digest)
        blockers = format_html_join("", "<li>{} — {}</li>", ((b["kind"], b["question"]) for b in facts["blockers"]))
        spend = sum(role["cost_usd"] for role in facts["llm_spend"].values())
        return format_html("<b>{}</b> (updated {})<ul>{}</ul>loops: {} · LLM spend ${}", facts["headline"],
                           digest.created_at.strftime("%Y-%m-%d %H:%M"), blockers,
                           ", ".join(f"{k} {v}" for k, v in facts["loops"].items()), f"{spend:.4f}")




class ProjectForm(forms.ModelForm):
    class Meta:
        model = Project
        fields = ["name", "slug", *REPOSITORY_FIELDS, "settings"]
        field_classes = {"settings": BoundedJSONFormField}  # no NUL or surrogate reaches the database or the page
        help_texts = {"repo_url": "https:// or ssh:// (or git@host:owner/repo.git) on a host the operator allows, "
                                  "no credentials in it; empty: the built-in local remote",
                      "settings": 'e.g. {"review_policies": {"stories_approval": {"sla_hours": 24}, '
                                  '"deployment_approval": {"sla_hours": 4, "action": "escalate", "manager": "maria"}}, '
                                  '"reviewers_group": "web-reviewers", "notifications": {"webhook_url": "https://…"}, '
                                  '"budgets": {"requirement": {"cost_usd": "20", "tokens": 2000000}, '
                                  '"roles": {"senior_engineer": {"steps": 40}}}}; budgets, prompts and playbooks '
                                  'are set when the project is made and changed by promotions only'}

    def clean_slug(self):
        """The form has no organization field, so Django skips the (organization, slug) constraint: check it here."""
        slug = self.cleaned_data["slug"]
        taken = Project.objects.filter(organization_id=self.instance.organization_id, slug=slug).exclude(pk=self.instance.pk)
        if taken.exists():
            raise forms.ValidationError(f"another project of this organization is already '{slug}'")
        return slug

    def clean_repo_url(self):
        """The worker hands this to git outside the sandbox: only a remote the operator's rule allows."""
        url = self.cleaned_data["repo_url"]
        if url and (reason := tenant_remote(self.instance, url).refusal()):
            raise forms.ValidationError(f"This remote {reason}.")
        return url

    def clean_settings(self):
        value = self.cleaned_data["settings"] or {}
        if not isinstance(value, dict):
            raise forms.ValidationError("settings must be a JSON object")
        problems = policy_problems(value.get("review_policies") or {})
        group = value.get("reviewers_group")
        if group and not Group.objects.filter(name=group).exists():
            problems.append(f"reviewers_group: there is no group '{group}'")
        before = (Project.objects.filter(pk=self.instance.pk).values_list("settings", flat=True).first() or {}
                  if self.instance.pk else None)
        budgets = value.get("budgets") or {}
        # new limits are bounded; budgets stored before the bounds (read as the maximum) do not block other edits
        kept = before is not None and (before.get("budgets") or {}) == budgets
        problems += [f"budgets: {p}" for p in (budget_shape_problems if kept else budget_problems)(budgets)]
        problems += _notification_problems(value.get("notifications") or {})
        problems += moved_settings(value)
        problems += repository_settings_problems(value)
        problems += slack_channel_problems(value, self.instance.organization_id)
        problems += [f"playbooks: {p}" for p in table_problems(value.get("playbooks") or {})]
        if before is not None:  # what a project starts with is set here; a change of it is a promotion's (ADR 39)
            problems += guarded_settings_problems(before, value)
        if problems:
            raise forms.ValidationError(problems)
        return value


    def clean(self):
        """A webhook secret belongs to one organization: whoever holds it may start runs on every project naming it."""
        cleaned = super().clean()
        for source in WEBHOOK_SOURCES:
            field = f"{source}_webhook_secret_env"
            if (env := cleaned.get(field)) and secret_env_shared(env, self.instance):
                self.add_error(field, f"'{env}' is named by another organization's project: each organization "
                                      "needs a secret of its own (ask the operator for one)")
        # every token variable the project names, the field's and the settings' (Jira), under one rule
        for where, env in token_envs_named(cleaned.get("token_env") or "", cleaned.get("settings")):
            if reason := token_env_refusal(env, self.instance):
                field = "token_env" if where == "token_env" else "settings"
                self.add_error(field, reason if field == where else f"{where}: {reason}")
        return cleaned


def _notification_problems(notifications) -> list[str]:
    if not isinstance(notifications, dict):
        return ['notifications must be a JSON object, e.g. {"webhook_url": "https://…"}']
    url = notifications.get("webhook_url", "")
    problem = (url_problem(url) if isinstance(url, str) else "must be a string") if url else ""
    if problem:  # the URL is a secret, so it is not repeated; its address is checked when sending (webhook.py)
        return [f"notifications.webhook_url {problem} (an https:// or http:// URL with a host)"]
    return []


def masked_settings(project_settings: dict) -> dict:
    """The settings with the webhook URL (a credential) replaced, for members who may not change the project."""
    notifications = project_settings.get("notifications") if isinstance(project_settings, dict) else None
    if not isinstance(notifications, dict) or not notifications.get("webhook_url"):
        return project_settings
    return {**project_settings, "notifications": {**notifications, "webhook_url": WEBHOOK_MASK}}


@admin.register(Project)
class ProjectAdmin(MemberAccess, admin.ModelAdmin):
    """Organization admins edit their projects' settings: SLA policies, reviewers group, webhook. What is decided
    without a person (deployments among it) is the project's pre-authorizations, in their own admin (ADR 36)."""

    form = ProjectForm
    list_display = ["__str__", "name", "repo_url", "host_kind", "base_branch"]
    list_select_related = ["organization"]

    def get_fields(self, request, obj=None):
        """Who may not change the project (not an admin of its organization) reads its settings with the
        webhook URL masked."""
        shown = "settings" if self.has_change_permission(request, obj) else "settings_masked"
        return ["name", "slug", *REPOSITORY_FIELDS, shown]

    @admin.display(description="settings")
    def settings_masked(self, project):
        return json.dumps(masked_settings(project.settings or {}), ensure_ascii=False)

    def save_model(self, request, obj, form, change):
        project_settings_save(obj)  # the promoted versions as they are now, not as the form read them
        for line in policy_contacts_refused(obj):  # said, not refused: the role or the group may come later
            self.message_user(request, line, messages.WARNING)

    def has_change_permission(self, request, obj=None):
        user = request.user
        if user.is_superuser:
            return True
        admin_of = Membership.objects.filter(user=user, role=Role.ADMIN)
        return admin_of.filter(organization_id=obj.organization_id).exists() if obj else admin_of.exists()


class SuperuserOnly:
    """Cross-tenant operational tables (every organization's rows, prompts, recipients): operators only,
    whatever Django model permissions a staff member was given."""

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_change_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_add_permission(self, request):
        return self.has_module_permission(request)

    def has_delete_permission(self, request, obj=None):
        return self.has_module_permission(request)


class OperatorAdmin(SuperuserOnly, admin.ModelAdmin):
    pass


@admin.register(Notification)
class NotificationAdmin(SuperuserOnly, admin.ModelAdmin):
    list_display = ["created_at", "event", "channel", "recipient", "state", "attempts", "last_error"]
    list_filter = ["state", "channel", "event"]
    list_select_related = True
    readonly_fields = [f.name for f in Notification._meta.fields]


@admin.register(StoryEdit)
class StoryEditAdmin(SuperuserOnly, admin.ModelAdmin):
    list_display = ["created_at", "story", "edited_by", "via"]
    list_select_related = ["story", "edited_by"]
    readonly_fields = [f.name for f in StoryEdit._meta.fields]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(SuperuserOnly, admin.ModelAdmin):
    """Which webhook deliveries made or found which requirement (a repeat of one of these ids does nothing)."""

    list_display = ["received_at", "project", "source", "delivery_id", "event", "requirement", "started_run"]
    list_filter = ["source", "started_run"]
    list_select_related = ["project__organization", "requirement"]
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields]


for model in (Organization, Membership, Artifact, OutboxEvent, Step, LLMCall):
    admin.site.register(model, OperatorAdmin)
