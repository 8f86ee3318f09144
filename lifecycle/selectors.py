"""Read-side queries: what a user may see (agents' contexts are in lifecycle.contexts)."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet

from lifecycle.models import Membership, Project, Requirement, ReviewTask
from lifecycle.models.tenancy import WEBHOOK_SOURCES
from lifecycle.states import Role


def requirements_visible_to(user: Any) -> QuerySet[Requirement]:
    return Requirement.objects.filter(organization__memberships__user=user)


def review_tasks_visible_to(user: Any) -> QuerySet[ReviewTask]:
    return ReviewTask.objects.filter(organization__memberships__user=user)


def projects_visible_to(user: Any) -> QuerySet[Project]:
    return Project.objects.filter(organization__memberships__user=user).order_by("name", "id")


def organization_admins(organization_id: Any) -> QuerySet[Any]:
    """The organization's active admins, by username: who decides its promotions and hears of escalations."""
    return get_user_model().objects.filter(is_active=True, memberships__organization_id=organization_id,
                                           memberships__role=Role.ADMIN).order_by("username")


def origins_visible_to(user: Any, organization_id: Any) -> bool:
    """Where people acted from (the audit's `origin`: addresses, user agents) is personal data: operators
    (superusers) and the organization's admins see it; submitters and reviewers see who acted, not from where."""
    if not getattr(user, "is_authenticated", False):
        return False
    return user.is_superuser or Membership.objects.filter(user=user, organization_id=organization_id,
                                                          role=Role.ADMIN).exists()


def token_env_shared(env: str, project: Project) -> bool:
    """Whether a project of another organization names `env` as a host token (its token_env, or its Jira
    settings'): whoever names a variable sends requests with its token, to a repository of their choosing, so
    one organization's token is never another's."""
    naming = Q(token_env=env) | Q(settings__jira__token_env=env)
    return Project.objects.filter(naming).exclude(organization_id=project.organization_id).exists()


def token_env_refusal(env: str, project: Project) -> str | None:
    """Why `project` may not name `env` as a host token (in its token_env or its Jira settings), or None: the one
    rule for the admin form and for every use. Whoever names a variable sends requests with its token, to a
    repository of their choosing, so one organization's token is never another's. A variable the operator bound to
    an organization (AITEAM_TOKEN_ENVS "NAME=org-slug") is that organization's alone, whoever else names it; an
    unbound one is refused to each organization while another organization's project names it too."""
    if owner := settings.AITEAM_TOKEN_ENV_ORGANIZATIONS.get(env):
        if project.organization_id is not None and project.organization.slug == owner:
            return None
        return (f"'{env}' is bound by the operator to another organization: each organization needs a token variable "
                "of its own (ask the operator for one)")
    if token_env_shared(env, project):
        return (f"'{env}' is named by another organization's project: each organization needs a token variable of "
                "its own (ask the operator for one)")
    return None


def secret_env_shared(env: str, project: Project) -> bool:
    """Whether a project of another organization names `env` as a webhook secret: then whoever signs for one
    could start runs on the other, so neither may use it."""
    naming = Q()
    for source in WEBHOOK_SOURCES:
        naming |= Q(**{f"{source}_webhook_secret_env": env})
    return Project.objects.filter(naming).exclude(organization_id=project.organization_id).exists()
