"""Read-side queries: what a user may see (agents' contexts are in lifecycle.contexts)."""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from lifecycle.models import Requirement, ReviewTask


def requirements_visible_to(user: Any) -> QuerySet[Requirement]:
    return Requirement.objects.filter(organization__memberships__user=user)


def review_tasks_visible_to(user: Any) -> QuerySet[ReviewTask]:
    return ReviewTask.objects.filter(organization__memberships__user=user)
