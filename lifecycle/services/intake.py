"""Brief intake: one transaction writes the requirement, its first audit row and its first event.

A client that may send the same POST twice (it timed out, its connection dropped) sends an Idempotency-Key header
with it (submit_once): the key is stored, unique per user, with the answer its submission got (the requirement it
made, or the ticket's live requirement it found) in the transaction of that submission, so a repeat gets the same
answer, even when the two arrive together (the second INSERT waits for the first's transaction and then fails on
the unique index), and even after that requirement ended. Keys are kept as long as their requirement.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from lifecycle import playbooks
from lifecycle.errors import DomainError, KeyReused, NotPermitted
from lifecycle.models import IdempotencyKey, Membership, Project, Requirement, StateTransition
from lifecycle.models.requirement import OUTCOME_SETTINGS
from lifecycle.services.outbox import emit
from lifecycle.services.prompts import prompt_bundle_for
from lifecycle.services.scheduling import step_schedule
from lifecycle.states import SUBMITTING_ROLES, RequirementState
from lifecycle.step_keys import first_step
from lifecycle.tickets import Ticket, ticket_problems

KEY_HEADER = "Idempotency-Key"
KEY_MAX_CHARS = 255


@dataclass(frozen=True)
class Submitted:
    """What a submission answered: its requirement, made (201) or, for a ticket, the live one found (200); replayed
    when an earlier POST with the same idempotency key got this answer first."""

    requirement: Requirement
    live: bool = False
    replayed: bool = False


def requirement_submit_once(*, user: Any, idempotency_key: str | None, **submission: Any) -> Submitted:
    """requirement_submit under the client's idempotency key (submit_once)."""
    return submit_once(user=user, idempotency_key=idempotency_key, submission=submission,
                       submit=lambda given: Submitted(requirement_submit(user=user, **given)))


def submit_once(*, user: Any, idempotency_key: str | None, submission: dict[str, Any],
                submit: Callable[[dict[str, Any]], Submitted]) -> Submitted:
    """`submit(submission)` once per (user, key): its answer; a repeat of the key with the same submission gets that
    answer again, replayed; KeyReused when the key came before with another submission. Without a key, every call
    submits."""
    if idempotency_key is None:
        return submit(submission)
    key = _checked_key(idempotency_key)
    # the project as the first submission resolved it (the user's only one), so that a repeat compares with it
    submission = {**submission, "project": submission.get("project") or default_project(user)}
    ensure_may_submit(user, submission["project"])  # before any key is looked up: a non-submitter learns nothing
    digest = _submission_sha256(**submission)
    try:
        with transaction.atomic():
            row = IdempotencyKey.objects.create(user=user, key=key, submission_sha256=digest)
            answer = submit(submission)
            row.requirement, row.live = answer.requirement, answer.live
            row.save(update_fields=["requirement", "live"])
        return answer
    except IntegrityError:
        earlier = IdempotencyKey.objects.select_related("requirement").filter(user=user, key=key).first()
        if earlier is None or earlier.requirement is None:
            raise  # another constraint (or the earlier requirement was deleted meanwhile)
    if earlier.submission_sha256 != digest:  # another project is another organization's, maybe: no id
        raise KeyReused("this key was sent before with another submission; use a new key for a new brief",
                        KEY_HEADER)
    return Submitted(earlier.requirement, live=earlier.live, replayed=True)


def ensure_may_submit(user: Any, project: Project) -> None:
    if not Membership.objects.filter(user=user, organization_id=project.organization_id, role__in=SUBMITTING_ROLES).exists():
        raise NotPermitted(f"{user} may not submit briefs to {project} (needs the submitter or admin role)")


def requirement_submit(*, user: Any, brief: str, title: str = "", project: Project | None = None,
                       via: str = "api", playbook: str = playbooks.DEFAULT, ticket: Ticket | None = None) -> Requirement:
    """Accept a brief (or a ticket, whose body is the brief) from a member with the submitter or admin role."""
    _checked_brief(brief)
    project = project or default_project(user)
    ensure_may_submit(user, project)
    return requirement_record(project=project, brief=brief, title=title, submitted_by=user, via=via, playbook=playbook,
                              ticket=ticket)


def requirement_record(*, project: Project, brief: str, title: str = "", submitted_by: Any = None, via: str,
                       actor_role: str = "", playbook: str = playbooks.DEFAULT,
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
            playbook=playbooks.playbook_named(playbook).name,
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


def _submission_sha256(*, brief: str, project: Project, title: str = "", playbook: str = playbooks.DEFAULT,
                       ticket: Ticket | None = None) -> str:
    """A submission as requirement_submit stores it (stripped, the title cut, the playbook's name, the ticket's source
    and key), digested: a repeat of a key must ask for the same. Migration 0040 digests stored requirements so."""
    stored = [brief.strip(), title.strip()[:200], str(project.pk), playbooks.playbook_named(playbook).name,
              *((ticket.source, ticket.key) if ticket else ("", ""))]
    return hashlib.sha256(json.dumps(stored).encode()).hexdigest()


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

