"""API tokens in the admin: a staff member issues and revokes their own (a superuser anyone's).

A new token's value is shown on the page that answers the form, and nowhere else: not in a message (stored
in a cookie or the session until shown), not on the change page, not in the admin's history. An expiry given
here is at most AITEAM_TOKEN_TTL_DAYS away (ADR 23): a later one is a form error, not silently shortened.
"""
from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.template.response import TemplateResponse
from django.utils import timezone

from lifecycle.admin_links import as_related_text
from lifecycle.models import ApiToken
from lifecycle.services.tokens import default_expiry, token_issue, token_revoke


class ApiTokenForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["user", "name", "expires_at"]
        help_texts = {"expires_at": "empty: AITEAM_TOKEN_TTL_DAYS from now, which is also the latest allowed"}

    def clean_expires_at(self):
        expires_at, latest = self.cleaned_data["expires_at"], default_expiry()
        if expires_at is not None and expires_at > latest:
            raise ValidationError(f"A token expires at most {settings.AITEAM_TOKEN_TTL_DAYS} days after it is issued "
                                  f"(AITEAM_TOKEN_TTL_DAYS): {timezone.localtime(latest):%Y-%m-%d %H:%M} at the latest.")
        return expires_at


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    form = ApiTokenForm
    list_display = ["name", "user", "shown_prefix", "status", "created_at", "expires_at", "last_used_at"]
    list_select_related = ["user"]
    search_fields = ["name", "prefix", "user__username"]
    actions = ["revoke"]

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_add_permission(self, request):
        return self.has_module_permission(request)

    def has_change_permission(self, request, obj=None):
        return False  # a token is issued or revoked, never edited

    def has_delete_permission(self, request, obj=None):
        return False  # revoked rows stay, for the record

    def get_queryset(self, request):
        rows = super().get_queryset(request)
        return rows if request.user.is_superuser else rows.filter(user=request.user)

    def get_fields(self, request, obj=None):
        if obj is not None:  # read-only: the user links to their page only for who may open it
            shown = ["name", "user", "shown_prefix", "status", "created_at", "expires_at", "last_used_at", "revoked_at"]
            return as_related_text(request, self, shown, shown)
        return ["user", "name", "expires_at"] if request.user.is_superuser else ["name", "expires_at"]

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj) if obj is not None else []

    def save_model(self, request, obj, form, change):
        if not request.user.is_superuser or obj.user_id is None:
            obj.user = request.user
        obj.issued_value = token_issue(token=obj)

    def response_add(self, request, obj, post_url_continue=None):
        return TemplateResponse(request, "admin/lifecycle/apitoken/issued.html", {
            **self.admin_site.each_context(request), "opts": ApiToken._meta, "title": "API token issued",
            "token": obj, "value": obj.issued_value,
        })

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):
        revoked = token_revoke(token_ids=queryset.values_list("pk", flat=True))
        messages.success(request, f"{revoked} token(s) revoked")

    @admin.display(description="token")
    def shown_prefix(self, obj: ApiToken) -> str:
        return f"{obj.prefix}…"

    @admin.display(description="status")
    def status(self, obj: ApiToken) -> str:
        return obj.status(timezone.now())
