"""Changes to a project's own settings made over the API (the admin's project form is the other way in)."""
from __future__ import annotations

import logging
from typing import Any

from django.contrib.admin.models import CHANGE, LogEntry
from django.db import transaction

from lifecycle.errors import NotPermitted
from lifecycle.models import Membership, Project
from lifecycle.states import Role

log = logging.getLogger("aiteam.progress")


def project_set_autonomous_deployments(*, project_id: Any, user: Any, enabled: bool) -> Project:
    """Opt a project in to (or out of) deployments approved by autonomous mode: its organization's admins only.
    Recorded in the project's admin history, where changes made in the admin's project form are recorded too."""
    with transaction.atomic():
        project = Project.objects.select_for_update().select_related("organization").get(pk=project_id)
        if not (user.is_superuser or Membership.objects.filter(user=user, organization_id=project.organization_id,
                                                               role=Role.ADMIN).exists()):
            raise NotPermitted(f"{user} is not an admin of {project.organization} and may not change its projects")
        if project.autonomous_deployments == enabled:
            return project
        project.autonomous_deployments = enabled
        project.save(update_fields=["autonomous_deployments"])
        LogEntry.objects.log_actions(user.pk, [project], CHANGE, change_message=(
            f"autonomous_deployments set to {str(enabled).lower()} over the API"), single_object=True)
    log.info("project %s: autonomous deployments %s by %s", project, "on" if enabled else "off", user)
    return project
