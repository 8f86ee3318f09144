"""Comments on the ticket a requirement came from (GitHub issue, GitLab issue, Jira issue), posted by the worker.

An outbox subscriber turns an event into one Notification row on the `ticket` channel, keyed by the event
(`outbox:<id>:ticket`: relaying the event again adds none), in the relay's transaction; once that commits the row
is sent like any notification (lifecycle/notifications/sending.py): claimed once, retried with backoff while the
host's failure is transient (no answer, 429, 5xx; after the host's Retry-After when that is longer), failed for
good when it is not (a token refused, an issue not found), and queued again by the beat if its message is lost. The
row holds the comment's text as structured parts (the untrusted ones without control or format characters:
agents/delivery/rich_text.py's block and literal), never a token: the host's settings and token are read when
sending (lifecycle/services/host_settings.py).

What is said, and when: work started (`RepositoryPrepared`), the pull or merge request's link (`Deployed`), the
Product Owner's answer or refusal (`TicketAnswered`, `TicketRefused`), and the real reason when the run stops for a
person (an escalation, a step failed to a human, an exhausted budget: `ReviewTaskOpened`) or ends (`RequirementCancelled`,
except after an answer or a refusal, which said why already). A failed delivery that will be retried says nothing
yet: when the retries run out, its step_failed task does. A project turns the comments off with
`settings["ticket_comments"] = false`.
"""
from __future__ import annotations

import json
import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.delivery import comments
from agents.delivery.api import ChangeRequest
from agents.delivery.pr_body import TicketRef, same_repository
from agents.delivery.rich_text import Block, Part, Span
from lifecycle.errors import DomainError
from lifecycle.models import Notification, OutboxEvent, Requirement, ReviewTask
from lifecycle.notifications.errors import ChannelError, ChannelRefused
from lifecycle.services import dispatch
from lifecycle.services.host_settings import github_settings, gitlab_settings, jira_settings
from lifecycle.states import ReviewKind
from lifecycle.tickets import HOST_SOURCES, TicketSource

log = logging.getLogger(__name__)
CHANNEL = "ticket"
COMMENTED_SOURCES = set(HOST_SOURCES)
STOPPING_TASKS = {ReviewKind.ESCALATION: "escalated to a person", ReviewKind.STEP_FAILED: "a step failed",
                  ReviewKind.BUDGET_EXHAUSTED: "the budget ran out"}
ENDED_BY_TRIAGE = ("TicketAnswered", "TicketRefused")


def queue_ticket_comment(event: OutboxEvent) -> None:
    """The outbox subscriber: the comment's row, once per event. A failure here is logged and never raises into
    the relay (a comment is a courtesy, not a step of the run)."""
    try:
        with transaction.atomic():  # a savepoint: a failed write leaves the relay's transaction usable
            row = _row_for(event)
    except Exception:
        log.exception("ticket comment for outbox event %s (%s) not queued", event.pk, event.name)
        return
    if row is not None:
        row_id = row.pk
        transaction.on_commit(lambda: _send_later(row_id))


def send(note: Notification) -> None:
    """The `ticket` channel: post the row's comment; ChannelError to retry, ChannelRefused when retrying cannot help."""
    requirement = Requirement.objects.select_related("project").get(pk=note.requirement_id)
    try:
        settings = _host_settings(requirement)
    except DomainError as exc:
        raise ChannelRefused(f"the project's ticket host is not usable: {exc}") from None
    result = comments.post_comment(settings, note.recipient, parts_from_json(note.body))
    if not result.ok and result.retryable:  # waited for as the host asked, when longer than the backoff
        raise ChannelError(result.error, retry_after_s=result.retry_after_s)
    if not result.ok:
        raise ChannelRefused(result.error)


def _row_for(event: OutboxEvent) -> Notification | None:
    requirement = Requirement.objects.select_related("project").filter(pk=event.requirement_id).first()
    if (requirement is None or requirement.ticket_source not in COMMENTED_SOURCES or not requirement.ticket_key
            or not requirement.ticket_via_webhook):  # a member's ticket naming an issue is not the (ADR 42)
        return None
    if requirement.project.settings.get("ticket_comments", True) is False or requirement.replay_of_id:
        return None
    comment = _comment(event, requirement)
    if comment is None:
        return None
    kind, parts = comment
    row, new = Notification.objects.get_or_create(
        key=f"outbox:{event.pk}:{CHANNEL}",
        defaults={"event": f"ticket_{kind}", "channel": CHANNEL, "recipient": requirement.ticket_key,
                  "requirement": requirement, "subject": f"{kind} on {requirement.ticket_key}"[:300],
                  "body": parts_to_json(parts), "next_attempt_at": timezone.now()})
    return row if new else None


def _comment(event: OutboxEvent, requirement: Requirement) -> tuple[str, list[Part]] | None:
    payload = event.payload or {}
    if event.name == "RepositoryPrepared":
        return "started", comments.started(requirement.pk, str(payload.get("branch") or ""))
    if event.name == "Deployed":
        return "delivered", _delivered(payload)
    if event.name == "TicketAnswered":
        return "answered", comments.answered(str(payload.get("text") or ""))
    if event.name == "TicketRefused":
        return "refused", comments.refused(str(payload.get("reason") or ""))
    if event.name == "RequirementCancelled":
        if OutboxEvent.objects.filter(requirement=requirement, name__in=ENDED_BY_TRIAGE).exists():
            return None
        return "stopped", comments.stopped(f"the requirement was cancelled: {payload.get('reason') or 'no reason given'}")
    if event.name == "ReviewTaskOpened":
        task = ReviewTask.objects.filter(pk=payload.get("review_task"), kind__in=list(STOPPING_TASKS)).first()
        if task is None:
            return None
        reason = f"{STOPPING_TASKS[task.kind]}. {task.question}" + (f"\n\n{task.reasoning}" if task.reasoning else "")
        return "stopped", comments.stopped(reason)
    return None


def _delivered(payload: dict[str, Any]) -> list[Part]:
    change = payload.get("pull_request")
    if not isinstance(change, dict) or not change.get("url"):
        return comments.pushed(str(payload.get("branch") or ""))
    request = ChangeRequest(number=int(change["number"]), url=str(change["url"]), draft=bool(change.get("draft")),
                            reused=bool(change.get("reused")))
    return comments.change_opened(request, str(change.get("kind") or "pull request"))


def _host_settings(requirement: Requirement) -> Any:
    """The host to comment on: the ticket's own (a GitHub or GitLab issue of the project's repository, a Jira site
    the project names); ChannelRefused when the project names none, or the ticket is another repository's issue
    (the same number there is someone else's issue)."""
    project, source = requirement.project, requirement.ticket_source
    settings = (jira_settings(project) if source == TicketSource.JIRA else github_settings(project)
                if source == TicketSource.GITHUB else gitlab_settings(project))
    if settings is None:
        raise ChannelRefused(f"the project's settings name no {source} {'site' if source == 'jira' else 'repository'}"
                             " to comment on")
    repository = getattr(settings, "repository", None) or getattr(settings, "project", "")
    ticket = TicketRef(source=source, key=requirement.ticket_key, url=requirement.ticket_url,
                       repository_id=requirement.ticket_repository_id)
    if source != TicketSource.JIRA and not same_repository(source, repository, ticket):
        raise ChannelRefused(f"the ticket is an issue of another repository than {repository}: not commented on")
    return settings


def _send_later(row_id: int) -> None:
    try:
        dispatch.send_task(dispatch.SEND_NOTIFICATION, row_id)
    except Exception:  # a broker that is down: the beat queues due rows again (notifications_requeue_due)
        log.exception("ticket comment %s not queued; the beat will", row_id)


def parts_to_json(parts: list[Part]) -> str:
    """The comment as the row keeps it: its parts, rendered per host when sent (Markdown, or Jira's ADF)."""
    return json.dumps([{"block": p.text} if isinstance(p, Block) else
                       {"spans": [{"text": s.text, "href": s.href, "literal": s.literal} for s in p]} for p in parts])


def parts_from_json(text: str) -> list[Part]:
    return [Block(item["block"]) if "block" in item else tuple(Span(**span) for span in item["spans"])
            for item in json.loads(text)]

