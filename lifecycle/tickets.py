"""Tickets: where one came from and how its key and address must look. Pure, shared by models, API and webhooks.

A ticket's text is untrusted: its body becomes a brief like any other and its title the requirement's title;
nothing in it chooses the project, the playbook, budgets or who may decide (those come from the project and
the authenticated request or the webhook's URL and secret).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import models

KEY_MAX_CHARS, URL_MAX_CHARS, TITLE_MAX_CHARS = 100, 500, 200


class TicketSource(models.TextChoices):
    API = "api"
    GITHUB = "github"
    GITLAB = "gitlab"
    JIRA = "jira"
    CLI = "cli"


HOST_SOURCES = (TicketSource.GITHUB, TicketSource.GITLAB, TicketSource.JIRA)  # trackers a signed webhook speaks for

# An issue number on GitHub or GitLab; a Jira issue key (project key, dash, number); anything printable otherwise.
_KEYS = {
    TicketSource.GITHUB: (re.compile(r"#[1-9][0-9]{0,9}"), "#<issue number>, e.g. #42"),
    TicketSource.GITLAB: (re.compile(r"#[1-9][0-9]{0,9}"), "#<issue iid>, e.g. #42"),
    TicketSource.JIRA: (re.compile(r"[A-Z][A-Z0-9_]{0,49}-[1-9][0-9]{0,9}"), "<PROJECT>-<number>, e.g. PROJ-7"),
}
_PRINTABLE = re.compile(rf"[^\x00-\x20\x7f][^\x00-\x1f\x7f]{{0,{KEY_MAX_CHARS - 2}}}[^\x00-\x20\x7f]|[^\x00-\x20\x7f]")
_URL = URLValidator(schemes=["http", "https"])


@dataclass(frozen=True)
class Ticket:
    source: str
    key: str
    title: str = ""
    body: str = ""
    url: str = ""
    repository_id: str = ""  # GitLab: the numeric id of the project, as the tracker's signed delivery said

    @property
    def brief(self) -> str:
        """What the Product Owner reads: the body, or the title of a ticket that has none."""
        return self.body.strip() or self.title.strip()


def key_problem(source: str, key: str) -> str | None:
    """Why `key` cannot be a `source` ticket's key, or None."""
    if source not in TicketSource.values:
        return f"the source is one of {', '.join(TicketSource.values)}"
    pattern, shape = _KEYS.get(source, (_PRINTABLE, f"1 to {KEY_MAX_CHARS} printable characters, no surrounding spaces"))
    return None if pattern.fullmatch(key or "") else f"a {source} ticket key is {shape}"


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a ticket's address (it is shown as a link), or None; empty is allowed."""
    if not url:
        return None
    if len(url) > URL_MAX_CHARS:
        return f"a ticket URL is at most {URL_MAX_CHARS} characters"
    try:
        _URL(url)
    except ValidationError:
        return "a ticket URL is an http:// or https:// address"
    return None


def ticket_problems(ticket: Ticket) -> dict[str, str]:
    """Each field of `ticket` that is wrong, with why (the body's length is the brief's rule, checked at intake)."""
    problems = {"key": key_problem(ticket.source, ticket.key), "url": url_problem(ticket.url)}
    if not ticket.brief:
        problems["body"] = "a ticket needs a body or a title"
    return {field: problem for field, problem in problems.items() if problem}
