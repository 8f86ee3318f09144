"""Changes to a project made over the API (the admin's project form and its pre-authorizations are the other way
in)."""
from __future__ import annotations

import logging
from typing import Any

from django.contrib.admin.models import CHANGE, LogEntry
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

from lifecycle.actors import Actor
from lifecycle.models import ActionPreauthorization, Project
from lifecycle.services.approvals import (
    APPROVE_DEPLOYMENT,
    ensure_project_admin,
    preauthorization_for,
    preauthorization_revoke,
    preauthorize,
)

log = logging.getLogger("aiteam.progress")


def with_autonomous_deployments(projects: QuerySet[Project]) -> QuerySet[Project]:
    """The projects, each with `autonomous_deployments`: whether it pre-authorized deployment_approval:approve (the
    API's name for it, from before pre-authorizations)."""
    grant = ActionPreauthorization.objects.filter(project=OuterRef("pk"), action=APPROVE_DEPLOYMENT)
    return projects.annotate(autonomous_deployments=Exists(grant))


def project_set_autonomous_deployments(*, project_id: Any, user: Any, enabled: bool) -> Project:
    """Grant (or withdraw) the project's pre-authorization of deployments: its organization's admins only.
    Recorded in the project's admin history, where changes made in the admin's project form are recorded too."""
    actor = Actor.human(user, "api")
    with transaction.atomic():
        project = Project.objects.select_for_update().select_related("organization").get(pk=project_id)
        ensure_project_admin(user, project)
        if (preauthorization_for(project.pk, APPROVE_DEPLOYMENT) is not None) == enabled:
            return project
        if enabled:
            preauthorize(project=project, action=APPROVE_DEPLOYMENT, actor=actor)
        else:
            preauthorization_revoke(project=project, action=APPROVE_DEPLOYMENT, actor=actor)
        LogEntry.objects.log_actions(user.pk, [project], CHANGE, change_message=(
            f"autonomous_deployments set to {str(enabled).lower()} over the API "
            f"({APPROVE_DEPLOYMENT} {'pre-authorized' if enabled else 'withdrawn'})"), single_object=True)
    log.info("project %s: %s %s by %s", project, APPROVE_DEPLOYMENT, "pre-authorized" if enabled else "withdrawn",
             user)
    return project
