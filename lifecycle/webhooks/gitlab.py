"""GitLab issue webhooks: the project's label added to an issue (or an issue opened with it) starts a run.
Documented shape: https://docs.gitlab.com/user/project/integrations/webhook_events/#work-item-events"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifecycle.errors import echoed
from lifecycle.tickets import TicketSource
from lifecycle.webhooks import signatures
from lifecycle.webhooks.readings import PayloadError, Reading, delivery_id, field, optional_text, ticket

ISSUE_HOOK = "Issue Hook"


def verify(secret: str, body: bytes, headers: Mapping[str, str]) -> bool:
    return signatures.token_valid(secret, headers.get("X-Gitlab-Token"))


def delivery_of(headers: Mapping[str, str]) -> str:
    """Idempotency-Key is the same on GitLab's retries of one delivery; older GitLab sends only the event UUID."""
    return delivery_id(headers.get("Idempotency-Key") or headers.get("X-Gitlab-Event-UUID"))


def read(headers: Mapping[str, str], payload: dict[str, Any], label: str) -> Reading:
    kind, attributes = headers.get("X-Gitlab-Event", ""), payload.get("object_attributes")
    action = attributes.get("action") if isinstance(attributes, dict) else None
    event = f"{kind}.{action}" if isinstance(action, str) else kind
    if kind != ISSUE_HOOK or payload.get("object_kind") != "issue":
        return Reading(event, ignored=f"a {echoed(kind) or 'unnamed'} event starts nothing (confidential issues neither)")
    if not _label_added(payload, label, action):
        return Reading(event, ignored=f"the label {label!r} was not added")
    issue = field(payload, "object_attributes", kind=dict)
    if issue.get("state") == "closed":
        return Reading(event, ignored="the issue is closed")
    return Reading(event, ticket=ticket(TicketSource.GITLAB, f"#{field(issue, 'iid', kind=int)}", field(issue, "title"),
                                        optional_text(issue, "description"), field(issue, "url"),
                                        next((name for name in repository_of(payload) if name.isdigit()), "")))


def _label_added(payload: dict[str, Any], label: str, action: Any) -> bool:
    changes = payload.get("changes")
    change = changes.get("labels") if isinstance(changes, dict) else None
    if change is not None:
        return label in _titles(change, "current") and label not in _titles(change, "previous")
    return action == "open" and label in _titles(payload, "labels")  # opened with it, reported without a change


def _titles(data: Any, name: str) -> set[str]:
    labels = field(data, name, kind=list)
    if not all(isinstance(item, dict) and isinstance(item.get("title"), str) for item in labels):
        raise PayloadError(f"the payload's {name} are not labels with titles")
    return {item["title"] for item in labels}


def repository_of(payload: dict[str, Any]) -> tuple[str, ...]:
    """The names the issue's project goes by: "group/name" and its numeric id (GitLab's API takes either)."""
    project = payload.get("project") if isinstance(payload.get("project"), dict) else {}
    path, number = project.get("path_with_namespace"), project.get("id")
    return (*((path,) if isinstance(path, str) else ()), *((str(number),) if type(number) is int else ()))
