"""Read-side queries: what a user may see (agents' contexts are in lifecycle.contexts)."""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from lifecycle.models import Membership, Project, Requirement, ReviewTask
from lifecycle.states import Role


def requirements_visible_to(user: Any) -> QuerySet[Requirement]:
    return Requirement.objects.filter(organization__memberships__user=user)


def review_tasks_visible_to(user: Any) -> QuerySet[ReviewTask]:
    return ReviewTask.objects.filter(organization__memberships__user=user)


def projects_visible_to(user: Any) -> QuerySet[Project]:
    return Project.objects.filter(organization__memberships__user=user).order_by("name", "id")


def origins_visible_to(user: Any, organization_id: Any) -> bool:
    """Where people acted from (the audit's `origin`: addresses, user agents) is personal data: operators
    (superusers) and the organization's admins see it; submitters and reviewers see who acted, not from where."""
    if not getattr(user, "is_authenticated", False):
        return False
    return user.is_superuser or Membership.objects.filter(user=user, organization_id=organization_id,
                                                          role=Role.ADMIN).exists()
