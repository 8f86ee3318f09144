"""Who the signed-in person is to the organizations, asked by every admin page's menu: answered from one query,
cached on the request."""
from __future__ import annotations

from django.http import HttpRequest


def member_roles(request: HttpRequest) -> frozenset[str]:
    """The roles an active staff member holds in any organization (empty for anyone else)."""
    if not hasattr(request, "_aiteam_roles"):
        user = request.user
        staff = user.is_active and user.is_staff
        request._aiteam_roles = frozenset(user.memberships.values_list("role", flat=True).distinct()) if staff else frozenset()
    return request._aiteam_roles


def is_member(request: HttpRequest) -> bool:
    """An active staff member of some organization, or an active superuser on the staff."""
    user = request.user
    return bool(user.is_active and user.is_staff and (user.is_superuser or member_roles(request)))
