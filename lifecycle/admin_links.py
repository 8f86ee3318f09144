"""Read-only related objects in the admin link to their page only for who may open it.

Django shows a read-only foreign key as a link to the related change page whatever the viewer's permissions, so a
member was shown links answering 403 (the organization, a user's page, an operator-only step). Here such a field
becomes a callable entry of `fields`/`readonly_fields` (both accept callables) that knows the request.
"""
from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import ForeignKey, Model
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html


def related_link(request: HttpRequest, model_admin: Any, related: Model | None) -> str:
    """`related` as a link to its admin page if this request may view or change it there, else as text."""
    if related is None:
        return model_admin.get_empty_value_display()
    site, model = model_admin.admin_site, related._meta.model
    if not site.is_registered(model) or not site.get_model_admin(model).has_view_or_change_permission(request, related):
        return str(related)
    try:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_change", args=[quote(related.pk)],
                      current_app=site.name)
    except NoReverseMatch:
        return str(related)
    return format_html('<a href="{}">{}</a>', url, related)


class RelatedText:
    """One read-only foreign key of a page, shown by `related_link` for this request. Equal by field name, so the
    entry Django excludes from the form (readonly_fields) is the one it finds among the fields."""

    def __init__(self, request: HttpRequest, model_admin: Any, name: str):
        self.request, self.model_admin, self.name = request, model_admin, name
        self.__name__ = name  # the row's CSS class and the model field's help text
        self.short_description = model_admin.model._meta.get_field(name).verbose_name

    def __call__(self, obj: Model) -> str:
        return related_link(self.request, self.model_admin, getattr(obj, self.name))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RelatedText) and other.name == self.name

    def __hash__(self) -> int:
        return hash((RelatedText, self.name))


def as_related_text(request: HttpRequest, model_admin: Any, entries, read_only) -> list:
    """`entries` with each foreign key named in `read_only` replaced by its RelatedText."""
    named = {entry.name if isinstance(entry, RelatedText) else entry for entry in read_only}
    keys = {f.name for f in model_admin.model._meta.get_fields() if isinstance(f, ForeignKey)}  # one-to-one too
    return [RelatedText(request, model_admin, e) if isinstance(e, str) and e in named & keys else e for e in entries]


class ViewableLinks:
    """Mixed (before Django's class) into a ModelAdmin or an inline: its read-only foreign keys link only where the
    viewer may go. On a ModelAdmin's page the viewer may not change, every field is read-only (as Django shows it)."""

    def get_readonly_fields(self, request, obj=None):
        fields = super().get_readonly_fields(request, obj)
        return as_related_text(request, self, fields, fields)

    def get_fields(self, request, obj=None):
        fields = super().get_fields(request, obj)
        view_only = isinstance(self, admin.ModelAdmin) and obj is not None and not self.has_change_permission(request, obj)
        return as_related_text(request, self, fields, fields if view_only else self.get_readonly_fields(request, obj))
