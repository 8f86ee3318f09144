"""A person (or, later, a tool acting for one) cancels a requirement: POST /requirements/{id}/cancel/.

Who may: the organization's reviewers and admins (the people who could reject it at a gate; a project's reviewers
group narrows it as for review tasks), and the member who submitted it, withdrawing their own. What happens is what
a rejection at a gate does (outcomes.requirement_cancel): cancelled, every waiting review task expired, a
`RequirementCancelled` event; a step still queued or running is skipped when a worker reaches it, so no model call
or push starts after the cancel commits.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction

from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import Requirement
from lifecycle.services.assignment import decide_refusal
from lifecycle.services.outcomes import requirement_cancel
from lifecycle.states import TERMINAL_STATES

REASON_MAX_CHARS = 2000


def requirement_cancel_request(*, requirement_id: Any, actor: Actor, reason: str,
                               origin: dict[str, Any] | None = None) -> Requirement:
    reason = reason.strip()
    if not reason or len(reason) > REASON_MAX_CHARS:
        raise DomainError(f"say why it is cancelled, in 1 to {REASON_MAX_CHARS} characters", "reason")
    with transaction.atomic():
        requirement = Requirement.objects.select_for_update(of=("self",)).select_related("organization").get(
            pk=requirement_id)
        own = requirement.submitted_by_id is not None and requirement.submitted_by_id == actor.user.pk
        if not own and (refusal := decide_refusal(actor.user, requirement.organization,
                                                  project_id=requirement.project_id)):
            raise NotPermitted(f"{refusal}; a submitter may cancel only their own requirements")
        if requirement.state in TERMINAL_STATES:
            raise IllegalTransition(f"the requirement is already {requirement.state}")
        requirement_cancel(requirement, actor=actor, reason=reason, origin=origin)
    return requirement
