"""Tickets in: a member's ticket through the API, and an issue a signed webhook reports.

A ticket makes one live requirement per (project, source, key, how it came): a second submission of it while the
first is still running gets the first back. The database decides (the partial unique index
one_live_requirement_per_ticket), so two deliveries that arrive together cannot both make one: the second INSERT
waits for the first transaction, fails, and reads what it made.

Only a signed webhook speaks for the tracker (ADR 42): a member may post a ticket naming GitHub, GitLab or Jira over
the API, but it is the member's, not the tracker's: it never holds the tracker's own delivery of that issue back,
is never commented on, and its change never closes the issue.

A webhook delivery id is recorded with the requirement it made or found, unique per project and source, so a
repeated delivery (a retry, a "Redeliver" click) does nothing.

A webhook's requirement has no submitter: the project's webhook secret signed it, not a person, so no member's
permissions are lent to it (ADR 0030). It runs the project's default playbook under the project's settings.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from lifecycle import playbooks
from lifecycle.models import Project, Requirement, WebhookDelivery
from lifecycle.services.intake import Submitted, default_project, requirement_record, requirement_submit, submit_once
from lifecycle.states import NON_TERMINAL_STATES
from lifecycle.tickets import Ticket

WEBHOOK_ACTOR = "webhook"


@dataclass(frozen=True)
class Delivery:
    """A verified webhook delivery: which host sent it, its id, and what it reported (for the audit row)."""

    source: str
    delivery_id: str
    event: str
    body_sha256: str  # the signed body's digest: the delivery id is not signed, so repeats are also known by it


def ticket_submit(*, user: Any, ticket: Ticket, project: Project | None = None, playbook: str = playbooks.DEFAULT,
                  idempotency_key: str | None = None) -> Submitted:
    """A member's ticket: its new requirement, or the ticket's live one (`live`); with an idempotency key, a repeat
    gets what the first POST got (`replayed`), made or found. The member's right to submit is checked before
    anything is looked up, so the answer tells a non-member nothing."""
    project = project or default_project(user)

    def submit(given: dict[str, Any]) -> Submitted:
        requirement, outcome = _once_per_ticket(project, ticket, False, lambda: requirement_submit(user=user, **given))
        return Submitted(requirement, live=outcome == "live")

    return submit_once(user=user, idempotency_key=idempotency_key, submit=submit, submission={
        "brief": ticket.brief, "title": ticket.title, "project": project, "playbook": playbook, "ticket": ticket})


def webhook_ticket_accept(*, project: Project, delivery: Delivery, ticket: Ticket) -> tuple[Requirement | None, str]:
    """The ticket a verified delivery reported: (its new requirement, "created"), (the ticket's live one, "live"),
    or (None, "repeat") when this delivery id, or this very body, was handled before. The host signs the body, not
    the delivery id: a captured body sent again under a new id, after the first run ended, is still a repeat."""
    try:
        with transaction.atomic():
            row = WebhookDelivery.objects.create(project=project, source=delivery.source,
                                                 delivery_id=delivery.delivery_id, body_sha256=delivery.body_sha256,
                                                 event=delivery.event, started_run=False)
            requirement, outcome = _once_per_ticket(project, ticket, True, lambda: requirement_record(
                project=project, brief=ticket.brief, title=ticket.title, via=delivery.source, actor_role=WEBHOOK_ACTOR,
                ticket=ticket, ticket_via_webhook=True,
                metadata={"delivery": delivery.delivery_id, "event": delivery.event}))
            row.requirement, row.started_run = requirement, outcome == "created"
            row.save(update_fields=["requirement", "started_run"])
    except IntegrityError:
        seen = WebhookDelivery.objects.filter(Q(delivery_id=delivery.delivery_id) | Q(body_sha256=delivery.body_sha256),
                                              project=project, source=delivery.source)
        if not seen.exists():
            raise
        return None, "repeat"
    return requirement, outcome


def live_requirement(project: Project, ticket: Ticket, via_webhook: bool) -> Requirement | None:
    return Requirement.objects.filter(project=project, ticket_source=ticket.source, ticket_key=ticket.key,
                                      ticket_via_webhook=via_webhook, state__in=NON_TERMINAL_STATES).first()


def _once_per_ticket(project: Project, ticket: Ticket, via_webhook: bool,
                     create: Callable[[], Requirement]) -> tuple[Requirement, str]:
    """`create()` in a savepoint: (the requirement, "created"); when the ticket's live requirement beat it to the
    unique index, (that one, "live")."""
    try:
        with transaction.atomic():
            requirement = create()
    except IntegrityError:
        live = live_requirement(project, ticket, via_webhook)
        if live is None:
            raise
        return live, "live"
    return requirement, "created"
