"""Jira webhooks (admin webhooks with a secret): an issue created with the project's label, or updated to add it,
starts a run. Documented shape: https://developer.atlassian.com/server/jira/platform/webhooks/"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from lifecycle.errors import echoed
from lifecycle.tickets import TicketSource
from lifecycle.webhooks import signatures
from lifecycle.webhooks.readings import PayloadError, Reading, delivery_id, field, ticket

CREATED, UPDATED = "jira:issue_created", "jira:issue_updated"


def verify(secret: str, body: bytes, headers: Mapping[str, str]) -> bool:
    return signatures.hmac_sha256_valid(secret, body, headers.get("X-Hub-Signature"))


def delivery_of(headers: Mapping[str, str]) -> str:
    return delivery_id(headers.get("X-Atlassian-Webhook-Identifier"))


def read(headers: Mapping[str, str], payload: dict[str, Any], label: str) -> Reading:
    event = payload.get("webhookEvent") if isinstance(payload.get("webhookEvent"), str) else ""
    if event not in (CREATED, UPDATED):
        return Reading(event, ignored=f"a {echoed(event) or 'unnamed'} event starts nothing")
    issue = field(payload, "issue", kind=dict)
    fields = field(issue, "fields", kind=dict)
    added = label in field(fields, "labels", kind=list) if event == CREATED else _label_added(payload, label)
    if not added:
        return Reading(event, ignored=f"the label {label!r} was not added")
    key = field(issue, "key")
    return Reading(event, ticket=ticket(TicketSource.JIRA, key, field(fields, "summary"),
                                        _text(fields.get("description")), _browse_url(field(issue, "self"), key)))


def _label_added(payload: dict[str, Any], label: str) -> bool:
    """Jira reports labels as space-separated strings before and after the change."""
    items = field(payload, "changelog", "items", kind=list) if "changelog" in payload else []
    for item in items:
        if isinstance(item, dict) and item.get("field") == "labels":
            before, after = (str(item.get(side) or "").split() for side in ("fromString", "toString"))
            if label in after and label not in before:
                return True
    return False


def _browse_url(api_url: str, key: str) -> str:
    """The issue's page, from its REST address (https://site/rest/api/2/issue/10001 → https://site/browse/KEY)."""
    parts = urlsplit(api_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise PayloadError("the payload's issue.self is not an http(s) address")
    return f"{parts.scheme}://{parts.netloc}/browse/{key}"


def _text(description: Any) -> str:
    """Wiki text as sent by REST v2 webhooks; an Atlassian Document (v3) is flattened to its text nodes."""
    if isinstance(description, str):
        return description
    if not isinstance(description, dict | list):
        return ""
    pending, words = [description], []
    while pending:  # iterative: a deep document cannot overflow the stack
        node = pending.pop()
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                words.append(node["text"])
            pending.extend(reversed(node.get("content") or []) if isinstance(node.get("content"), list) else [])
        elif isinstance(node, list):
            pending.extend(reversed(node))
    return " ".join(words)
