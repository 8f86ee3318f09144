"""How a person hears of conversations by e-mail, in the admin: each staff member sets their own (a superuser
anyone's). One row a person (adding it again replaces it); without one, a new system conversation is e-mailed at once."""
from __future__ import annotations

from django.contrib import admin

from lifecycle.models import ConversationEmail


@admin.register(ConversationEmail)
class ConversationEmailAdmin(admin.ModelAdmin):
    list_display = ["user", "delivery", "digest_through"]
    list_select_related = ["user"]
    readonly_fields = ["digest_through"]

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request) and (obj is None or self._own(request, obj))

    def has_change_permission(self, request, obj=None):
        return self.has_view_permission(request, obj)

    def has_add_permission(self, request):
        return self.has_module_permission(request)

    def has_delete_permission(self, request, obj=None):
        return False  # set "no e-mail" instead

    def get_queryset(self, request):
        rows = super().get_queryset(request)
        return rows if request.user.is_superuser else rows.filter(user=request.user)

    def get_fields(self, request, obj=None):
        return ["user", "delivery", "digest_through"] if request.user.is_superuser else ["delivery", "digest_through"]

    def get_readonly_fields(self, request, obj=None):
        return ["user", "digest_through"] if obj is not None else ["digest_through"]

    def save_model(self, request, obj, form, change):
        if not request.user.is_superuser or obj.user_id is None:
            obj.user = request.user
        if not change:  # adding one's choice again replaces it: one row a person
            earlier = ConversationEmail.objects.filter(user=obj.user).first()
            if earlier is not None:
                obj.pk, obj.digest_through = earlier.pk, earlier.digest_through
        super().save_model(request, obj, form, change)

    @staticmethod
    def _own(request, obj: ConversationEmail) -> bool:
        return request.user.is_superuser or obj.user_id == request.user.pk
