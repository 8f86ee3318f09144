"""Brief intake: one transaction writes the requirement, its first audit row and its first event."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from lifecycle import playbooks
from lifecycle.errors import DomainError, NotPermitted
from lifecycle.models import Membership, Project, Requirement, StateTransition
from lifecycle.models.requirement import OUTCOME_SETTINGS
from lifecycle.services.outbox import emit
from lifecycle.services.prompts import prompt_bundle_for
from lifecycle.services.steps import PO_CLARIFY, step_schedule
from lifecycle.states import SUBMITTING_ROLES, RequirementState


def requirement_submit(*, user: Any, brief: str, title: str = "", project: Project | None = None,
                       via: str = "api", playbook: str = playbooks.DEFAULT) -> Requirement:
    """Accept a brief: Requirement(RECEIVED), its audit row, its event and its first step, queued on commit."""
    brief = brief.strip()
    if not brief:
        raise DomainError("the brief is empty", "brief")
    if len(brief) > settings.AITEAM_BRIEF_MAX_CHARS:
        raise DomainError(f"the brief is longer than {settings.AITEAM_BRIEF_MAX_CHARS} characters", "brief")
    project = project or _default_project(user)
    if not Membership.objects.filter(user=user, organization_id=project.organization_id, role__in=SUBMITTING_ROLES).exists():
        raise NotPermitted(f"{user} may not submit briefs to {project} (needs the submitter or admin role)")
    with transaction.atomic():
        requirement = Requirement.objects.create(
            organization_id=project.organization_id, project=project, title=title.strip()[:200], brief=brief,
            submitted_by=user, prompt_bundle=prompt_bundle_for(project), run_settings=_outcome_settings(project),
            playbook=playbooks.playbook_named(playbook).name,
        )
        StateTransition.objects.create(
            requirement=requirement, subject="requirement", subject_id=str(requirement.pk), event="submit",
            from_state="", to_state=RequirementState.RECEIVED, actor_user=user, via=via,
        )
        emit(requirement, "RequirementReceived", {"round": requirement.clarification_round})
        step_schedule(requirement_id=requirement.pk, key=PO_CLARIFY, attempt=requirement.clarification_round)
    return requirement


def _outcome_settings(project: Project) -> dict:
    """Fixed with the requirement, like its prompts: a later edit of the project does not change a running
    requirement's budgets or gates, and its replays run under the same ones."""
    return {key: project.settings[key] for key in OUTCOME_SETTINGS if key in (project.settings or {})}


def _default_project(user: Any) -> Project:
    projects = list(Project.objects.filter(organization__memberships__user=user)[:2])
    if len(projects) == 1:
        return projects[0]
    if not projects:
        raise DomainError("you belong to no organization with a project; ask an admin to add you", "project")
    raise DomainError("you can submit to several projects; name one", "project")

