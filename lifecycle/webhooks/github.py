"""GitHub issue webhooks: an issue labelled with the project's label, or a `/aiteam` comment by a member, starts a
run. Documented shapes: https://docs.github.com/en/webhooks/webhook-events-and-payloads (issues, issue_comment)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lifecycle.errors import echoed
from lifecycle.tickets import TicketSource
from lifecycle.webhooks import signatures
from lifecycle.webhooks.readings import Reading, delivery_id, field, optional_text, ticket

COMMAND = "/aiteam"
# Who may start a run by comment: people with a role in the repository, never any GitHub user who can comment
MEMBERS = ("OWNER", "MEMBER", "COLLABORATOR")


def verify(secret: str, body: bytes, headers: Mapping[str, str]) -> bool:
    return signatures.hmac_sha256_valid(secret, body, headers.get("X-Hub-Signature-256"))


def delivery_of(headers: Mapping[str, str]) -> str:
    return delivery_id(headers.get("X-GitHub-Delivery"))


def read(headers: Mapping[str, str], payload: dict[str, Any], label: str) -> Reading:
    kind, action = headers.get("X-GitHub-Event", ""), payload.get("action")
    event = f"{kind}.{action}" if isinstance(action, str) else kind
    if kind == "issues":
        return _labelled(event, payload, label)
    if kind == "issue_comment":
        return _commanded(event, payload)
    return Reading(event, ignored=f"a {echoed(kind) or 'unnamed'} event starts nothing")


def _labelled(event: str, payload: dict[str, Any], label: str) -> Reading:
    if payload.get("action") != "labeled":
        return Reading(event, ignored="only an issue labelled with the project's label starts a run")
    if field(payload, "label", "name") != label:
        return Reading(event, ignored=f"the label added is not {label!r}")
    return _issue(event, payload)


def _commanded(event: str, payload: dict[str, Any]) -> Reading:
    if payload.get("action") != "created":
        return Reading(event, ignored="only a new comment can be a command")
    words = field(payload, "comment", "body").split(maxsplit=1)
    if not words or words[0] != COMMAND:
        return Reading(event, ignored=f"the comment does not start with {COMMAND}")
    if field(payload, "comment", "author_association") not in MEMBERS:
        return Reading(event, ignored=f"{COMMAND} counts only from the repository's owner, members or collaborators")
    if "pull_request" in field(payload, "issue", kind=dict):
        return Reading(event, ignored=f"{COMMAND} on a pull request starts nothing")
    return _issue(event, payload)


def _issue(event: str, payload: dict[str, Any]) -> Reading:
    issue = field(payload, "issue", kind=dict)
    if issue.get("state") == "closed":
        return Reading(event, ignored="the issue is closed")
    number = field(issue, "number", kind=int)
    return Reading(event, ticket=ticket(TicketSource.GITHUB, f"#{number}", field(issue, "title"),
                                        optional_text(issue, "body"), field(issue, "html_url")))


def repository_of(payload: dict[str, Any]) -> tuple[str, ...]:
    """The names the issue's repository goes by: "owner/name" (none when the payload does not say)."""
    repository = payload.get("repository")
    name = repository.get("full_name") if isinstance(repository, dict) else None
    return (name,) if isinstance(name, str) else ()
