"""Who hears about a review task: whoever holds it, else its group, else everyone who may decide it.

Only active members of the task's organization: a former member keeps no assignment's messages.
"""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from lifecycle.models import ReviewTask
from lifecycle.selectors import organization_admins
from lifecycle.services.assignment import assignable_users


def reviewers(task: ReviewTask) -> list[Any]:
    holder = holders(task)
    if holder:
        return holder
    if task.assignee_group_id:
        # Django groups are global: only the group's members who belong to the task's organization hear of it.
        members = task.assignee_group.user_set.filter(is_active=True, memberships__organization_id=task.organization_id)
        return list(members.order_by("username"))
    return assignable_users(task)


def holders(task: ReviewTask) -> list[Any]:
    """The assignee while still an active member of the task's organization (a former member hears nothing)."""
    if not task.assignee_id:
        return []
    members = get_user_model().objects.filter(
        pk=task.assignee_id, is_active=True, memberships__organization_id=task.organization_id)
    return list(members[:1])


def managers(task: ReviewTask, manager_id: Any = None, *, fallback: bool = False) -> list[Any]:
    """The manager a policy named, else the organization's admins (whoever holds the task is told apart); everyone
    who may decide the task when the policy's manager could not (`fallback`)."""
    if fallback:
        return assignable_users(task)
    if manager_id is not None:
        return list(get_user_model().objects.filter(pk=manager_id, is_active=True,
                                                    memberships__organization_id=task.organization_id))
    return list(organization_admins(task.organization_id))
