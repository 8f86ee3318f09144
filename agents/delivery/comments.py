"""Comments on the ticket a run came from (a GitHub or GitLab issue, a Jira issue): when work starts, with the
pull request's link, and with the real reason when the run stops.

A comment is a courtesy to the people watching the ticket, not a step of the run: `post_comment` never raises.
It returns a CommentResult that says whether the comment landed and, if not, why (scrubbed of the token) and
whether trying again later may help (no answer, 429, 5xx) and how long the host asked to wait (its Retry-After),
for the caller's retry policy; a token refused, an issue not found or a body refused will fail the same way again.
Every outcome is logged, without the token.
"""
from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from agents.delivery.api import ChangeRequest, HostError
from agents.delivery.errors import DeliveryError, NoAnswer, scrub
from agents.delivery.github import GitHubClient, GitHubSettings
from agents.delivery.gitlab import GitLabClient, GitLabSettings
from agents.delivery.jira import JiraClient, JiraSettings, basic_credential
from agents.delivery.pr_body import issue_number
from agents.delivery.rich_text import Part, block, link, literal, ours, to_adf, to_markdown

logger = logging.getLogger(__name__)
REASON_MAX_CHARS = 2_000
HostSettings = GitHubSettings | GitLabSettings | JiraSettings


@dataclass(frozen=True)
class CommentResult:
    ok: bool
    url: str = ""  # the comment's address, where the host gives one
    error: str = ""
    retryable: bool = False
    status: int | None = None  # the host's HTTP status of a refusal; None when it did not answer
    retry_after_s: float | None = None  # the host's Retry-After, when it said how long to wait

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "url": self.url, "error": self.error, "retryable": self.retryable, "status": self.status,
                "retry_after_s": self.retry_after_s}


def started(requirement_id: int | UUID, branch: str) -> list[Part]:
    """`requirement_id`: a number or a UUID (the lifecycle's), rendered from its own type, never from text."""
    shown = requirement_id if isinstance(requirement_id, UUID) else int(requirement_id)
    return [(ours(f"aiteam started work on this ticket (requirement {shown}), on branch "),
             literal(branch), ours(". It will comment again with the change, or with why it stopped."))]


def change_opened(change: ChangeRequest, kind: str = "pull request") -> list[Part]:
    state = "draft " if change.draft else ""
    verb = "is still open" if change.reused else "is open for review"
    return [(ours(f"The {state}{kind} "), link(f"#{change.number}" if kind == "pull request" else f"!{change.number}",
                                             change.url), ours(f" {verb}."))]


def pushed(branch: str) -> list[Part]:
    return [(ours("aiteam delivered this ticket's change on branch "), literal(branch),
             ours(" (no pull request: the project names no repository on its host)."))]


def answered(text: str) -> list[Part]:
    """The Product Owner's answer to a ticket that asked a question: shown literally, like any model output."""
    return [(ours("aiteam read this ticket as a question, so no change will be made. Its answer:"),),
            block(text, REASON_MAX_CHARS)]


def refused(reason: str) -> list[Part]:
    return [(ours("aiteam will not work on this ticket. The reason:"),), block(reason, REASON_MAX_CHARS)]


def stopped(reason: str) -> list[Part]:
    """The real reason, shown literally: it may quote the ticket, a test's output or the model's words."""
    return [(ours("aiteam stopped working on this ticket. The reason:"),), block(reason, REASON_MAX_CHARS)]


def post_comment(settings: HostSettings, ticket_key: str, parts: list[Part]) -> CommentResult:
    """Post `parts` on ticket `ticket_key` ("#12" on GitHub and GitLab, "PROJ-7" on Jira); never raises."""
    secrets = [settings.token] + ([basic_credential(settings.email, settings.token)]
                                  if isinstance(settings, JiraSettings) else [])
    try:
        result = _post(settings, ticket_key, parts)
    except NoAnswer as exc:
        result = CommentResult(ok=False, error=str(exc), retryable=True)
    except HostError as exc:
        result = CommentResult(ok=False, error=str(exc), retryable=exc.retryable, status=exc.status,
                               retry_after_s=exc.retry_after_s)
    except DeliveryError as exc:  # refused before any call (a bad key or URL): a person must change something
        result = CommentResult(ok=False, error=str(exc))
    except Exception as exc:  # a bug here must not stop a run that is otherwise fine: logged, reported
        trace = scrub("".join(traceback.format_exception(exc)), *secrets)  # scrubbed: an exception may quote anything
        logger.error("ticket comment on %s failed unexpectedly:\n%s", type(settings).__name__, trace)
        result = CommentResult(ok=False, error=scrub(f"unexpected {type(exc).__name__}: {exc}", *secrets)[:500])
    level = logging.INFO if result.ok else logging.WARNING
    logger.log(level, "ticket comment on %r %s: %s", ticket_key, "posted" if result.ok else "failed",
               result.url or result.error)
    return result


def _post(settings: HostSettings, ticket_key: str, parts: list[Part]) -> CommentResult:
    if isinstance(settings, JiraSettings):
        with JiraClient.from_settings(settings) as jira:
            jira.add_comment(ticket_key, to_adf(parts))
        return CommentResult(ok=True, url=f"{settings.site_url.rstrip('/')}/browse/{ticket_key}")
    number = issue_number(ticket_key)
    if number is None:
        raise DeliveryError(f"not an issue number (#12): {ticket_key!r}")
    if isinstance(settings, GitHubSettings):
        with GitHubClient.from_settings(settings) as github:
            answer = github.comment_on_issue(settings.repository, number, to_markdown(parts))
        return CommentResult(ok=True, url=str(answer.get("html_url", "")))
    with GitLabClient.from_settings(settings) as gitlab:
        gitlab.comment_on_issue(settings.project, number, to_markdown(parts))
    return CommentResult(ok=True)
