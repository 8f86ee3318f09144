"""Slack in the admin: operators bind a workspace (team id) to an organization and name its bot token's
variable; each organization's admins map their workspace's Slack users to their members."""
from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin
from django.core.exceptions import ValidationError

from lifecycle.admin_access import is_member
from lifecycle.models import Membership, SlackIdentity, SlackWorkspace
from lifecycle.states import Role


class SlackWorkspaceForm(forms.ModelForm):
    class Meta:
        model = SlackWorkspace
        fields = ["organization", "team_id", "bot_token_env"]

    def clean_bot_token_env(self):
        env = self.cleaned_data["bot_token_env"]
        if env not in settings.AITEAM_SLACK_TOKEN_ENVS:
            raise ValidationError(f"{env!r} is not one of AITEAM_SLACK_TOKEN_ENVS")
        return env


@admin.register(SlackWorkspace)
class SlackWorkspaceAdmin(admin.ModelAdmin):
    """Operators only: whoever names a team id receives its people's messages and button presses."""

    form = SlackWorkspaceForm
    list_display = ["team_id", "organization", "bot_token_env", "created_at"]

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    has_add_permission = has_module_permission
    has_change_permission = has_delete_permission = has_view_permission


class SlackIdentityForm(forms.ModelForm):
    class Meta:
        model = SlackIdentity
        fields = ["workspace", "slack_user_id", "user"]

    def clean(self):
        data = super().clean()
        workspace, user = data.get("workspace"), data.get("user")
        if workspace and user and not Membership.objects.filter(user=user,
                                                                organization_id=workspace.organization_id).exists():
            raise ValidationError(f"{user} is not a member of {workspace.organization}")
        return data


@admin.register(SlackIdentity)
class SlackIdentityAdmin(admin.ModelAdmin):
    """Which aiteam member each Slack user is: their organization's admins edit it (what they do in Slack is done
    as that member)."""

    form = SlackIdentityForm
    list_display = ["slack_user_id", "user", "workspace", "created_at"]
    list_select_related = ["user", "workspace__organization"]
    search_fields = ["slack_user_id", "user__username"]

    def _admin_of(self, request):
        return Membership.objects.filter(user=request.user, role=Role.ADMIN).values("organization_id")

    def has_module_permission(self, request):
        """Any member on the staff, as for the other tables (the same answer, cached on the request: no query of
        its own on every admin page); the rows and choices they get are their admin organizations' only, so a
        member who is no admin sees none and can pick no workspace."""
        return is_member(request)

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    has_add_permission = has_module_permission
    has_change_permission = has_delete_permission = has_view_permission

    def get_queryset(self, request):
        rows = super().get_queryset(request)
        return rows if request.user.is_superuser else rows.filter(workspace__organization__in=self._admin_of(request))

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if not request.user.is_superuser and db_field.name == "workspace":
            kwargs["queryset"] = SlackWorkspace.objects.filter(organization__in=self._admin_of(request))
        if not request.user.is_superuser and db_field.name == "user":
            kwargs["queryset"] = db_field.related_model.objects.filter(
                memberships__organization__in=self._admin_of(request)).distinct()
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
