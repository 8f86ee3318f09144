"""The meta-evaluation log in the admin: read-only, because the log is append-only (lifecycle/models/meta_eval.py):
an entry is a measurement taken when its fact happened, and an edited or deleted one would rewrite the trends drawn
from it. A staff member sees their organizations' entries, an operator every entry."""
from django.contrib import admin

from lifecycle.conversations_admin import StaffMember
from lifecycle.models import MetaEvalLog


@admin.register(MetaEvalLog)
class MetaEvalLogAdmin(StaffMember, admin.ModelAdmin):
    list_display = ["created_at", "kind", "role", "playbook", "organization", "project", "requirement"]
    list_filter = ["kind", "playbook", "role"]
    list_select_related = ["organization", "project__organization", "requirement"]
    readonly_fields = [f.name for f in MetaEvalLog._meta.fields]

    def get_queryset(self, request):
        rows = super().get_queryset(request)
        return rows if request.user.is_superuser else rows.filter(organization__memberships__user=request.user)
