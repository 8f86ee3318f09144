"""The system speaks first (issue 24, ADR 36): which outbox events open a system conversation, with what facts,
addressed to whom.

The occasions: a delivery (`Deployed`, with the branch and the pull request), a failed delivery
(`DeliveryFailed`, with its reason), an escalation to a human (`ReviewTaskOpened` of an escalation task: the third
failed attempt, or a failure repeated after a fix), a budget run out (`BudgetExhausted`, with the budget table), and
a review task waiting past its SLA (`ReviewTaskEscalated`, the first `ReviewTaskReminded`, or `ReviewTaskAssigned`
by the policy). The facts are read from the rows and go through the credential scrubber: never a token.

Addressed to the requirement's submitter and the project's watchers: `Project.settings["watchers"]`, a list of
usernames; only active members of the organization count. One conversation per event occurrence: the
conversation names its outbox event (a unique column), so an event relayed again starts none. It reaches them on
the web (the unread count), by e-mail (lifecycle/notifications/conversation_mail.py) and, when the project names
`settings["slack_channel"]`, in a Slack thread of its own (lifecycle/notifications/slack.py), queued by the
outbox handler (lifecycle/handlers.py: speak_first) since services do not import the channels.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model

from agents.delivery.errors import strip_credentials
from lifecycle.models import Conversation, OutboxEvent, Requirement, ReviewTask
from lifecycle.services.conversations import system_conversation_start
from lifecycle.states import ReviewKind

log = logging.getLogger(__name__)
FAILING_SHOWN = 10
Facts = tuple[str, str]  # (title, facts)


def system_conversation_open(event: OutboxEvent) -> Conversation | None:
    """The outbox subscriber: the event's system conversation, or None when it has one already or is no occasion."""
    if Conversation.objects.filter(outbox_event=event).exists():
        return None
    requirement = Requirement.objects.select_related("project", "submitted_by").filter(pk=event.requirement_id).first()
    if requirement is None or requirement.replay_of_id:  # a replay is a record: nobody is told of it
        return None
    occasion = OCCASIONS[event.name](event, requirement)
    recipients = recipients_for(requirement)
    if occasion is None or not recipients:
        return None
    title, facts = occasion
    return system_conversation_start(requirement=requirement, event=event.name, title=f"{title}: {requirement}",
                                     facts=strip_credentials(facts), recipients=recipients, outbox_event=event)


def recipients_for(requirement: Requirement) -> list[Any]:
    """The submitter and the project's watchers, while active members of the requirement's organization."""
    watchers = requirement.project.settings.get("watchers") or []
    usernames = [name for name in watchers if isinstance(name, str)]
    members = get_user_model().objects.filter(is_active=True, memberships__organization_id=requirement.organization_id)
    submitter = list(members.filter(pk=requirement.submitted_by_id)) if requirement.submitted_by_id else []
    return submitter + [u for u in members.filter(username__in=usernames).order_by("username") if u not in submitter]


def _delivered(event: OutboxEvent, requirement: Requirement) -> Facts:
    lines = [f"The requirement was delivered: branch {event.payload.get('branch')} pushed to "
             f"{event.payload.get('remote') or requirement.project.repo_url}."]
    pull = event.payload.get("pull_request") or {}
    if pull.get("url"):
        draft = " (a draft)" if pull.get("draft") else ""
        lines.append(f"Pull request #{pull.get('number')}{draft}: {pull['url']}")
    return "Delivered", "\n".join(lines)


def _delivery_failed(event: OutboxEvent, requirement: Requirement) -> Facts:
    undone = ", ".join(str(c) for c in event.payload.get("compensations") or []) or "nothing"
    return "Delivery failed", (f"Delivering to {requirement.project.repo_url or 'the project repository'} failed: "
                               f"{event.payload.get('error')}\nUndone after the failure: {undone}.")


def _escalated(event: OutboxEvent, requirement: Requirement) -> Facts | None:
    task = _task(event)
    if task is None or task.kind != ReviewKind.ESCALATION:
        return None
    context = task.context or {}
    lines = [task.question]
    if context.get("attempts"):
        lines.append(f"Attempts: {context['attempts']}; routing rule: {context.get('routing_rule') or 'none'}.")
    failing = context.get("failing_tests") or []
    if failing:
        lines.append("Failing tests: " + "; ".join(map(str, failing[:FAILING_SHOWN]))
                     + (f" (and {len(failing) - FAILING_SHOWN} more)" if len(failing) > FAILING_SHOWN else ""))
    return "Escalated to a human", "\n".join(lines)


def _budget_exhausted(event: OutboxEvent, requirement: Requirement) -> Facts:
    task = requirement.review_tasks.filter(kind=ReviewKind.BUDGET_EXHAUSTED).order_by("-created_at").first()
    exhausted = event.payload.get("exhausted") or []
    lines = [f"The budget ran out before step '{event.payload.get('step')}'; the requirement is paused.",
             "Exhausted: " + "; ".join(_limit_line(e) for e in exhausted)]
    table = (task.context or {}).get("budget") if task is not None else None
    if table:
        lines.append("Budget (spent / limit / remaining):")
        lines += [f"  {scope} {dimension}: {row.get('spent')} / {_or_none(row.get('limit'))} / "
                  f"{_or_none(row.get('remaining'))}"
                  for scope, dimensions in table.items() for dimension, row in dimensions.items()]
    return "Budget exhausted", "\n".join(lines)


def _limit_line(item: Any) -> str:
    if not isinstance(item, dict):
        return str(item)
    return f"{item.get('scope')} {item.get('dimension')}: spent {item.get('spent')} of {item.get('limit')}"


def _or_none(value: Any) -> str:
    return "unlimited" if value is None else str(value)


def _past_sla(event: OutboxEvent, requirement: Requirement) -> Facts | None:
    """The first time a task is overdue (any policy action), or when the policy escalates it; later reminders
    start nothing more."""
    if event.name == "ReviewTaskReminded" and event.payload.get("reminder") != 1:
        return None
    if event.name == "ReviewTaskAssigned" and event.payload.get("by") is not None:
        return None  # a person's assignment, not the SLA policy's
    task = _task(event)
    if task is None or not task.is_pending:
        return None
    holder = task.assignee or task.assignee_group or "nobody yet"
    done = {"ReviewTaskEscalated": "escalated it", "ReviewTaskReminded": "reminded its reviewers",
            "ReviewTaskAssigned": f"handed it to {holder}"}[event.name]
    return "Review overdue", (
        f"The {task.get_kind_display()} task (round {task.round}) has waited since "
        f"{task.created_at:%Y-%m-%d %H:%M} UTC, past its SLA deadline of {task.sla_deadline:%Y-%m-%d %H:%M} UTC; "
        f"the SLA policy {done}. It is held by {holder}.\nThe question: {task.question}")


def _task(event: OutboxEvent) -> ReviewTask | None:
    return (ReviewTask.objects.select_related("assignee", "assignee_group")
            .filter(pk=event.payload.get("review_task")).first())


OCCASIONS: dict[str, Callable[[OutboxEvent, Requirement], Facts | None]] = {
    "Deployed": _delivered,
    "DeliveryFailed": _delivery_failed,
    "ReviewTaskOpened": _escalated,
    "BudgetExhausted": _budget_exhausted,
    "ReviewTaskEscalated": _past_sla,
    "ReviewTaskReminded": _past_sla,
    "ReviewTaskAssigned": _past_sla,
}
SYSTEM_EVENTS = tuple(OCCASIONS)
