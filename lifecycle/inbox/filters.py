"""The inbox's filters. Status defaults to "waiting for a decision", so the list opens as an inbox
(but to "all" with "decided by the SLA policy" or "decided in advance", whose tasks are all decided).

A value a filter cannot read (an unknown status, assignment or SLA choice, a project id that is not
a UUID) raises IncorrectLookupParameters, as Django's own field filters do: the changelist redirects to ?e=1.
"""
from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import ValidationError
from django.utils import timezone

from lifecycle.models import Project
from lifecycle.states import SLA_POLICY_ROLE, ReviewState

DUE_SOON = timedelta(hours=4)


class StatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"
    default = "pending"

    def __init__(self, request, params, model, model_admin):
        super().__init__(request, params, model, model_admin)
        if request.GET.get(AttentionFilter.parameter_name) in ("by_policy", "automatic"):  # else always empty
            self.default = "all"

    def lookups(self, request, model_admin):
        return [("pending", "Waiting for a decision"), ("resolved", "Decided"), ("expired", "Expired"), ("all", "All")]

    def value(self):
        return super().value() or self.default

    def queryset(self, request, queryset):
        """An unknown status is refused rather than read as "all": a mistyped link must not look like an
        inbox with every decided task in it."""
        value = self.value()
        if value == "pending":
            return queryset.pending().of_real_runs()
        if value in (ReviewState.RESOLVED, ReviewState.EXPIRED):
            return queryset.filter(state=value)
        if value == "all":
            return queryset
        raise IncorrectLookupParameters(f"unknown status '{value}'")

    def choices(self, changelist):
        for lookup, title in self.lookup_choices:
            yield {"selected": self.value() == lookup, "display": title,
                   "query_string": changelist.get_query_string({self.parameter_name: lookup})}


class AssignmentFilter(admin.SimpleListFilter):
    title = "assigned"
    parameter_name = "assigned"

    def lookups(self, request, model_admin):
        return [("me", "Assigned to me"), ("my_groups", "To my groups"), ("unassigned", "Unassigned"),
                ("others", "Assigned to others")]

    def queryset(self, request, queryset):
        value, user = self.value(), request.user
        if value == "me":
            return queryset.assigned_to(user)
        if value == "my_groups":
            return queryset.for_groups_of(user)
        if value == "unassigned":
            return queryset.unassigned()
        if value == "others":
            return queryset.exclude(assignee=None).exclude(assignee=user)
        return _unfiltered(self, queryset)


class AttentionFilter(admin.SimpleListFilter):
    title = "SLA"
    parameter_name = "sla"

    def lookups(self, request, model_admin):
        return [("overdue", "Overdue"), ("due_soon", "Due within 4 h"), ("escalated", "Escalated"),
                ("by_policy", "Decided by the SLA policy"), ("automatic", "Decided in advance (pre-authorized, autonomous)")]

    def queryset(self, request, queryset):
        value, now = self.value(), timezone.now()
        if value == "overdue":
            return queryset.overdue(now).of_real_runs()
        if value == "due_soon":
            return queryset.pending().of_real_runs().filter(sla_deadline__gte=now, sla_deadline__lt=now + DUE_SOON)
        if value == "escalated":
            return queryset.escalated()
        if value == "by_policy":  # timed out: the SLA sweep applied the policy's default
            return queryset.filter(decided_by_policy=SLA_POLICY_ROLE)
        if value == "automatic":  # decided without a person, not for lack of one (pre-authorized, autonomous…)
            return queryset.of_real_runs().exclude(decided_by_policy__in=["", SLA_POLICY_ROLE])
        return _unfiltered(self, queryset)


class ProjectFilter(admin.SimpleListFilter):
    """Only the projects of the user's organizations (a plain related filter would list everyone's)."""

    title = "project"
    parameter_name = "project"

    def lookups(self, request, model_admin):
        projects = Project.objects.select_related("organization").order_by("organization__slug", "slug")
        if not request.user.is_superuser:
            projects = projects.filter(organization__memberships__user=request.user)
        return [(str(p.pk), str(p)) for p in projects]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        try:
            return queryset.filter(requirement__project_id=self.value())
        except ValidationError as exc:  # not a UUID
            raise IncorrectLookupParameters(exc) from exc


def _unfiltered(list_filter: admin.SimpleListFilter, queryset):
    """No choice made: every row. A value that is not one of the choices is refused, like an unknown status."""
    if not list_filter.value():
        return queryset
    raise IncorrectLookupParameters(f"unknown {list_filter.title} '{list_filter.value()}'")
