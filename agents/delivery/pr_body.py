"""The title and body of a delivered change's pull request (GitHub) or merge request (GitLab): a pure function.

The body links the ticket so merging closes it where the host can (`Fixes #N` on GitHub, `Closes #N` on GitLab,
only for an issue of the same repository: a keyword naming another repository's issue could close an issue
the ticket's author picked), names a Jira ticket by key and address, and lists the change's scope and the tests
before and after. Every piece of untrusted text is rendered by agents/delivery/rich_text.py (shown literally,
nothing it holds pings, links or hides), each list is capped, and the whole stays under BODY_MAX_CHARS, below
GitHub's 65,536 characters (GitLab allows 1,048,576).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from agents.delivery.rich_text import Part, Span, block, link, literal, neutral, ours, to_markdown

BODY_MAX_CHARS = 60_000
NAMES_SHOWN = 20  # test names and files listed per kind; the rest is counted
SUMMARY_MAX_CHARS = 6_000
_NUMBER_KEY = re.compile(r"^#([1-9][0-9]{0,9})$")
_CLOSING = {"github": "Fixes", "gitlab": "Closes"}


@dataclass(frozen=True)
class TicketRef:
    source: str  # api, github, gitlab, jira, cli (lifecycle/tickets.py)
    key: str  # "#12" on GitHub and GitLab, "PROJ-7" on Jira
    title: str = ""
    url: str = ""
    via_webhook: bool = False  # the tracker's own signed delivery: only then may the change close the issue
    repository_id: str = ""  # GitLab: the numeric id of the issue's project, from that signed delivery


@dataclass(frozen=True)
class Scope:
    """What the change touches, measured from the merge base."""

    lines_added: int
    lines_removed: int
    modules: tuple[str, ...] = ()  # top-level modules touched
    files: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()  # why it needs a person's decision: over a limit, CI, dependency or settings files


@dataclass(frozen=True)
class SuiteCounts:
    passed: int
    failed: int
    errors: int = 0
    skipped: int = 0


@dataclass(frozen=True, kw_only=True)
class SuiteResults:
    after: SuiteCounts
    before: SuiteCounts | None = None  # None: the repository had no tests to run at base
    base_commit: str = ""
    fail_to_pass: tuple[str, ...] = ()  # failed at base, pass now: the reproduction of the bug
    newly_failing: tuple[str, ...] = ()  # passed at base, fail now (a gate stops these; listed if one gets through)


def issue_number(key: str) -> int | None:
    """The number of a GitHub or GitLab ticket key ("#12"), or None."""
    match = _NUMBER_KEY.match(key)
    return int(match[1]) if match else None


def change_title(ticket: TicketRef | None, fallback: str) -> str:
    """A title that cannot mention or reference anything, at most 250 characters (GitLab takes 255, GitHub
    256; each client cuts any title to its host's limit, GitLab's after adding `Draft: `)."""
    title = ticket.title if ticket and ticket.title.strip() else fallback
    return neutral(f"{ticket.key}: {title}" if ticket and ticket.source == "jira" else title)


def change_body(*, host: str, repository: str, ticket: TicketRef | None, scope: Scope, tests: SuiteResults,
                summary: str = "", branch: str = "") -> str:
    """The body for `host` ("github" or "gitlab") of a change to `repository` ("owner/name", "group/name")."""
    parts: list[Part] = [_ticket_line(host, repository, ticket)]
    if ticket and ticket.title.strip():
        parts.append((ours("Ticket: "), literal(ticket.title)))
    parts += [(ours("## Change"),), *_scope_parts(scope, branch), (ours("## Tests"),), *_test_parts(tests)]
    if summary.strip():
        parts += [(ours("## What changed, in the engineer's words (unverified)"),), block(summary, SUMMARY_MAX_CHARS)]
    body = to_markdown(parts)
    # The caps above keep a body far below the limit; this holds even if they change (a cut fence stays code).
    return body if len(body) <= BODY_MAX_CHARS else body[: BODY_MAX_CHARS - 1] + "…"


def _ticket_line(host: str, repository: str, ticket: TicketRef | None) -> tuple[Span, ...]:
    if ticket is None:
        return (ours("No ticket: this change comes from a brief."),)
    number = issue_number(ticket.key)
    if (number and ticket.via_webhook and ticket.source == host and host in _CLOSING
            and same_repository(host, repository, ticket)):
        return (ours(f"{_CLOSING[host]} #{number}"),)
    # Our words as the link's text: the address itself is the ticket's author's text and is not shown as markup
    address = (ours(", "), link("open the ticket", ticket.url)) if link("", ticket.url).href else ()
    if ticket.source == "jira":
        return (ours("Jira: "), literal(ticket.key), *address)
    return (ours(f"Ticket ({ticket.source}): "), literal(ticket.key), *address)


def same_repository(host: str, repository: str, ticket: TicketRef) -> bool:
    """True when the ticket's address is an issue of `repository` (or it has none: the project's own webhook): only
    then may a body close it, or a comment go to that repository's issue of the same number. A GitLab project named
    by its numeric id is matched by the id its issue's signed delivery carried (its address names the path)."""
    if not ticket.url:
        return True
    if host == "gitlab" and repository.isdigit():
        return ticket.repository_id == repository
    path = urlsplit(ticket.url).path.rstrip("/").lower()
    issues = "/-/issues/" if host == "gitlab" else "/issues/"
    expected = f"/{repository.lower()}{issues}{ticket.key.lstrip('#')}"
    return path == expected or (host == "gitlab" and path == expected.replace("/-/issues/", "/issues/"))


def _scope_parts(scope: Scope, branch: str) -> list[Part]:
    changed = scope.lines_added + scope.lines_removed
    line = f"- {changed} lines changed (+{scope.lines_added} −{scope.lines_removed}) in {len(scope.files)} files, "
    parts: list[Part] = [(ours(line + f"{len(scope.modules)} top-level modules: "), *_names(scope.modules))]
    if branch:
        parts.append((ours("- branch "), literal(branch)))
    if scope.files:
        parts.append((ours("- files: "), *_names(scope.files)))
    flags = (ours("- needs a person's decision: "), *_names(scope.flags)) if scope.flags else (ours("- within limits"),)
    return [*parts, flags]


def _test_parts(tests: SuiteResults) -> list[Part]:
    at = f" (at {tests.base_commit[:12]})" if tests.base_commit else ""
    before = _counts(tests.before) if tests.before else "no tests ran"
    parts: list[Part] = [(ours(f"- before{at}: {before}"),), (ours(f"- after: {_counts(tests.after)}"),)]
    if tests.fail_to_pass:
        parts.append((ours(f"- fail-to-pass ({len(tests.fail_to_pass)}): "), *_names(tests.fail_to_pass)))
    if tests.newly_failing:
        parts.append((ours(f"- newly failing ({len(tests.newly_failing)}): "), *_names(tests.newly_failing)))
    return parts


def _counts(counts: SuiteCounts) -> str:
    extra = "".join(f", {n} {label}" for n, label in ((counts.errors, "errors"), (counts.skipped, "skipped")) if n)
    return f"{counts.passed} passed, {counts.failed} failed{extra}"


def _names(names: tuple[str, ...]) -> tuple[Span, ...]:
    if not names:
        return (ours("none"),)
    shown = [literal(name) for name in names[:NAMES_SHOWN]]
    spans = [s for i, name in enumerate(shown) for s in ((ours(", "), name) if i else (name,))]
    rest = len(names) - NAMES_SHOWN
    return (*spans, ours(f" and {rest} more")) if rest > 0 else tuple(spans)
