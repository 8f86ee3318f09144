"""Brief intake: one transaction writes the requirement, its first audit row and its first event.

A client that may send the same POST twice (it timed out, its connection dropped) sends an Idempotency-Key
header with it (requirement_submit_once): the key is stored on the requirement, unique per submitter, so a
repeat gets the requirement the first one made, even when the two arrive together (the second INSERT waits
for the first's transaction and then fails on the unique index). Keys are kept as long as their requirement.
"""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from lifecycle import playbooks
from lifecycle.errors import DomainError, KeyReused, NotPermitted
from lifecycle.models import Membership, Project, Requirement, StateTransition
from lifecycle.models.requirement import OUTCOME_SETTINGS
from lifecycle.services.outbox import emit
from lifecycle.services.prompts import prompt_bundle_for
from lifecycle.services.scheduling import step_schedule
from lifecycle.states import SUBMITTING_ROLES, RequirementState
from lifecycle.step_keys import first_step
from lifecycle.tickets import Ticket, ticket_problems

KEY_HEADER = "Idempotency-Key"
KEY_MAX_CHARS = 255


def requirement_submit_once(*, user: Any, idempotency_key: str | None, **submission: Any) -> tuple[Requirement, bool]:
    """requirement_submit under the client's idempotency key: (the requirement, True) when this call made it;
    (the one an earlier call with the same key and the same submission made, False) for a repeat; KeyReused when
    the key came before with another submission. Without a key, every call makes a requirement."""
    if idempotency_key is None:
        return requirement_submit(user=user, **submission), True
    key = _checked_key(idempotency_key)
    # the project as the first submission resolved it (the user's only one), so that a repeat compares with it
    submission["project"] = submission.get("project") or default_project(user)
    try:
        return requirement_submit(user=user, idempotency_key=key, **submission), True
    except IntegrityError:
        earlier = Requirement.objects.filter(submitted_by=user, idempotency_key=key).first()
        if earlier is None:
            raise  # another constraint (or the earlier requirement was deleted meanwhile)
    if not _same_submission(earlier, **submission):  # another project is another organization's, maybe: no id
        raise KeyReused("this key was sent before with another submission; use a new key for a new brief",
                        KEY_HEADER)
    return earlier, False


def requirement_submit(*, user: Any, brief: str, title: str = "", project: Project | None = None,
                       via: str = "api", playbook: str = playbooks.DEFAULT,
                       idempotency_key: str | None = None, ticket: Ticket | None = None) -> Requirement:
    """Accept a brief (or a ticket, whose body is the brief) from a member with the submitter or admin role."""
    _checked_brief(brief)
    project = project or default_project(user)
    if not Membership.objects.filter(user=user, organization_id=project.organization_id, role__in=SUBMITTING_ROLES).exists():
        raise NotPermitted(f"{user} may not submit briefs to {project} (needs the submitter or admin role)")
    return requirement_record(project=project, brief=brief, title=title, submitted_by=user, via=via, playbook=playbook,
                              idempotency_key=idempotency_key, ticket=ticket)


def requirement_record(*, project: Project, brief: str, title: str = "", submitted_by: Any = None, via: str,
                       actor_role: str = "", playbook: str = playbooks.DEFAULT, idempotency_key: str | None = None,
                       ticket: Ticket | None = None, ticket_via_webhook: bool = False,
                       metadata: dict | None = None) -> Requirement:
    """Requirement(RECEIVED), its audit row, its event and its first step, queued on commit. The caller has
    decided this submission may be made: requirement_submit for a member, services.tickets for a webhook signed
    with the secret the project names (no submitter; `actor_role` and `via` say what sent it, and
    `ticket_via_webhook` that the tracker itself vouches for the ticket)."""
    brief = _checked_brief(brief)
    if ticket is not None and (problems := ticket_problems(ticket)):
        field, problem = next(iter(problems.items()))
        raise DomainError(f"{field}: {problem}", "ticket")
    with transaction.atomic():
        requirement = Requirement.objects.create(
            organization_id=project.organization_id, project=project, title=title.strip()[:200], brief=brief,
            submitted_by=submitted_by, prompt_bundle=prompt_bundle_for(project), run_settings=_outcome_settings(project),
            playbook=playbooks.playbook_named(playbook).name, idempotency_key=idempotency_key,
            ticket_source=ticket.source if ticket else "", ticket_key=ticket.key if ticket else "",
            ticket_url=ticket.url if ticket else "", ticket_via_webhook=ticket is not None and ticket_via_webhook,
            ticket_repository_id=ticket.repository_id if ticket and ticket_via_webhook else "",
        )
        StateTransition.objects.create(
            requirement=requirement, subject="requirement", subject_id=str(requirement.pk), event="submit",
            from_state="", to_state=RequirementState.RECEIVED, actor_user=submitted_by, actor_role=actor_role, via=via,
            metadata=metadata or {},
        )
        emit(requirement, "RequirementReceived", {"round": requirement.clarification_round})
        step_schedule(requirement_id=requirement.pk, key=first_step(ticket=ticket is not None, repository=bool(project.repo_url)),
                      attempt=requirement.clarification_round)
    return requirement


def _checked_brief(brief: str) -> str:
    brief = brief.strip()
    if not brief:
        raise DomainError("the brief is empty", "brief")
    if len(brief) > settings.AITEAM_BRIEF_MAX_CHARS:
        raise DomainError(f"the brief is longer than {settings.AITEAM_BRIEF_MAX_CHARS} characters", "brief")
    return brief


def _checked_key(key: str) -> str:
    if not 0 < len(key) <= KEY_MAX_CHARS or not all(" " <= char <= "~" for char in key):
        raise DomainError(f"an idempotency key is 1 to {KEY_MAX_CHARS} printable ASCII characters", KEY_HEADER)
    return key


def _same_submission(earlier: Requirement, *, brief: str, project: Project, title: str = "", via: str = "api",
                     playbook: str = playbooks.DEFAULT, ticket: Ticket | None = None) -> bool:
    """Whether a repeated submission asks for what `earlier` was made from, compared as requirement_submit
    stores it."""
    stored = (brief.strip(), title.strip()[:200], project.pk, playbooks.playbook_named(playbook).name,
              (ticket.source, ticket.key) if ticket else ("", ""))
    return (earlier.brief, earlier.title, earlier.project_id, earlier.playbook,
            (earlier.ticket_source, earlier.ticket_key)) == stored


def _outcome_settings(project: Project) -> dict:
    """Fixed with the requirement, like its prompts: a later edit of the project does not change a running
    requirement's budgets or gates, and its replays run under the same ones."""
    return {key: project.settings[key] for key in OUTCOME_SETTINGS if key in (project.settings or {})}


def default_project(user: Any) -> Project:
    projects = list(Project.objects.filter(organization__memberships__user=user)[:2])
    if len(projects) == 1:
        return projects[0]
    if not projects:
        raise DomainError("you belong to no organization with a project; ask an admin to add you", "project")
    raise DomainError("you can submit to several projects; name one", "project")

