"""Deliver an approved branch: push it, then (where the host is configured) open its pull request (GitHub) or merge
request (GitLab), or reuse the one open from the branch.

A saga: each forward step registers how to undo what it did before the next step runs; when
a later step fails, the registered undos run newest first and each outcome is recorded (an undo
that finds nothing of this run's to undo records nothing), so a failed delivery leaves the remote
as it found it. Undos are registered before the call they undo: a push that git carried out
although the answer never came (a timeout) is undone too. A pull request whose opening got no
answer, or a 5xx, is looked up by branch and adopted instead: the host may well have opened it,
and undoing it would make the retry open a second. Only what this run did is undone: a branch
that was already on the remote at this commit, or a pull request that was already open,
belongs to an earlier run and is kept; a reused pull request gets this run's title and body
(its earlier text is put back if the delivery then fails).

That same rule makes a re-run after a crash idempotent: the push finds its commit already
there (a no-op) and the pull request step finds the open PR and reuses it, so a delivery
retried any number of times pushes once and opens one pull request.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agents.delivery import git_remote
from agents.delivery.api import ChangeRequest, HostError
from agents.delivery.change_requests import ChangeRequests, change_requests_for
from agents.delivery.credentials import HostAuth
from agents.delivery.errors import DeliveryError, NoAnswer, strip_credentials
from agents.delivery.github import GitHubSettings
from agents.delivery.gitlab import GitLabSettings
from agents.delivery.remotes import Remote, RemoteRefused

logger = logging.getLogger(__name__)
EventSink = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class DeliveryPlan:
    workspace: Path
    branch: str
    remote: Remote  # with the operator's rule, checked before every git call
    base: str = "main"
    github: GitHubSettings | None = None  # a pull request on GitHub
    gitlab: GitLabSettings | None = None  # a merge request on GitLab; neither: push only
    title: str = ""
    body: str = ""
    auth: HostAuth | None = None  # the host token for an https remote, handed to git through its environment only
    last_pushed: str = ""  # the commit this branch's previous delivery pushed: the only one this push may replace

    def __post_init__(self) -> None:
        if self.github and self.gitlab:
            raise DeliveryError("a delivery opens a pull request on GitHub or a merge request on GitLab, not both")

    @property
    def host_settings(self) -> GitHubSettings | GitLabSettings | None:
        return self.github or self.gitlab

    @property
    def repository(self) -> str | None:
        """The repository (GitHub) or project (GitLab) the change request is opened on."""
        return self.github.repository if self.github else self.gitlab.project if self.gitlab else None


@dataclass(frozen=True)
class CompensationRecord:
    name: str
    ok: bool
    error: str = ""


@dataclass
class DeliveryResult:
    succeeded: bool
    remote_url: str  # credentials stripped
    branch: str
    base: str
    repository: str | None = None
    head_commit: str = ""
    pushed_commits: list[tuple[str, str]] = field(default_factory=list)  # (sha, subject) the branch brings beyond base
    already_on_remote: bool = False  # the remote had this commit before this run
    # {"number", "url", "reused", "draft", "kind": "pull request" | "merge request", "host": "github" | "gitlab"}
    pull_request: dict[str, Any] | None = None
    steps: list[str] = field(default_factory=list)  # forward steps that completed
    compensations: list[CompensationRecord] = field(default_factory=list)  # in the order they ran
    error: str = ""
    refused: bool = False  # the remote broke the operator's rule: nothing ran, a person must change it

    def to_dict(self) -> dict[str, Any]:
        return {
            "succeeded": self.succeeded, "error": self.error, "refused": self.refused, "remote_url": self.remote_url,
            "branch": self.branch, "base": self.base, "repository": self.repository, "head_commit": self.head_commit,
            "already_on_remote": self.already_on_remote,
            "pushed_commits": [{"sha": sha, "subject": subject} for sha, subject in self.pushed_commits],
            "pull_request": self.pull_request, "steps": list(self.steps),
            "compensations": [{"name": c.name, "ok": c.ok, "error": c.error} for c in self.compensations],
        }


def deliver(plan: DeliveryPlan, *, on_event: EventSink | None = None) -> DeliveryResult:
    """Run the saga. Expected failures (git or the host said no) come back as a failed result, never raised."""
    saga = _Saga(on_event)
    result = DeliveryResult(succeeded=False, remote_url=strip_credentials(plan.remote.url), branch=plan.branch,
                            base=plan.base, repository=plan.repository)
    host = change_requests_for(plan.host_settings) if plan.host_settings else None
    try:
        saga.run("push", lambda: _push(plan, result, saga))
        if host is not None:
            saga.run("pull_request", lambda: _change_request(plan, host, result, saga))
        result.succeeded = True
    except DeliveryError as exc:
        result.error, result.refused = str(exc), isinstance(exc, RemoteRefused)
        result.compensations = saga.compensate()
    except BaseException:
        saga.compensate()  # a bug or an interruption must not leave a half delivery either
        raise
    finally:
        if host is not None:
            host.close_client()
        result.steps = list(saga.done)
    saga.emit({"type": "delivery_finished", "succeeded": result.succeeded, "error": result.error})
    return result


def _push(plan: DeliveryPlan, result: DeliveryResult, saga: _Saga) -> str:
    ws, branch, remote, auth = plan.workspace, plan.branch, plan.remote, plan.auth
    remote.checked_url()  # a refused remote fails before any git command starts (git_remote checks each call again)
    outcome = git_remote.inspect_push(ws, branch, remote, base=plan.base, auth=auth)
    result.head_commit, result.pushed_commits = outcome.commit, outcome.commits
    result.already_on_remote = outcome.already_there
    if outcome.already_there:
        return f"{branch} already at {outcome.commit[:12]} on the remote"
    # Registered before pushing: a push that fails after the remote took it (a timeout) is still undone.
    if outcome.previous is None:
        saga.register("delete remote branch",
                      lambda: git_remote.delete_branch(ws, branch, remote, expected=outcome.commit, auth=auth))
    else:
        previous = outcome.previous
        saga.register("restore remote branch", lambda: git_remote.restore_branch(
            ws, branch, remote, to=previous, expected=outcome.commit, auth=auth))
    # Our own earlier push may be replaced (a rework reset the branch), under a lease on it; anything else on the
    # remote branch is someone's work: a plain push, which git refuses unless it only adds to it.
    ours = bool(plan.last_pushed) and outcome.previous == plan.last_pushed
    git_remote.push_commit(ws, branch, remote, outcome.commit, auth=auth, replacing=plan.last_pushed if ours else None)
    return f"pushed {branch} at {outcome.commit[:12]} ({len(outcome.commits)} commits)"


def _change_request(plan: DeliveryPlan, host: ChangeRequests, result: DeliveryResult, saga: _Saga) -> str:
    title, body = plan.title or f"Deliver {plan.branch}", plan.body
    change = host.find_open(plan.branch)
    if change is None:
        change = _open(plan, host, saga, title, body)
    else:  # an earlier run's (ADR 42: the same issue's next run): it describes this run's change from now on
        before = change
        saga.register(f"restore {host.noun} text", lambda: host.update(before, before.title, before.body))
        host.update(change, title, body)
    result.pull_request = {"number": change.number, "url": change.url, "reused": change.reused, "draft": change.draft,
                           "kind": host.noun, "host": host.host}
    return f"{'reused' if change.reused else 'opened'} {host.noun} #{change.number}"


def _open(plan: DeliveryPlan, host: ChangeRequests, saga: _Saga, title: str, body: str) -> ChangeRequest:
    """Open the change request. When the host's answer never came or was a 5xx, it may have opened it all the same:
    the one open from the branch is looked up and adopted, so a retry never opens a second. Only a definite refusal
    (a 4xx) leaves none of ours, and fails the step."""
    answer: dict[str, Any] = {}  # "change": the one this run opened; "refused": the host answered it opened none

    def close_opened() -> bool:
        if answer.get("refused"):
            return False  # one open now is someone else's (a 422/409 "already exists" races one)
        found = answer.get("change") or host.find_open(plan.branch)  # opened although no answer came
        if found:
            host.close(found.number)
        return bool(found)

    # Registered before opening, like the push's undo: a run that fails after this must leave none of its own open
    saga.register(f"close {host.noun}", close_opened)
    try:
        answer["change"] = host.open(plan.branch, plan.base, title, body)
    except DeliveryError as exc:
        if not _maybe_done(exc):
            answer["refused"] = True
            raise
        found = host.find_open(plan.branch)  # a failure to look is raised: the undo looks once more
        if found is None:
            raise
        answer["change"] = replace(found, reused=False)  # opened by this run, with its title and body
    return answer["change"]


def _maybe_done(exc: DeliveryError) -> bool:
    """Whether the host may have done what it was asked although it said no answer or an error: no answer at all, or
    a 5xx (a gateway that timed out while the host carried on). A 4xx, or a refusal before sending, is definite."""
    return isinstance(exc, NoAnswer) or (isinstance(exc, HostError) and exc.status >= 500)


class _Saga:
    def __init__(self, on_event: EventSink | None) -> None:
        self.done: list[str] = []
        self._undo: list[tuple[str, Callable[[], object]]] = []
        self._on_event = on_event

    def run(self, name: str, step: Callable[[], str]) -> None:
        self.emit({"type": "step_started", "step": name})
        try:
            detail = step()
        except DeliveryError as exc:
            self.emit({"type": "step_failed", "step": name, "error": str(exc)})
            raise
        self.done.append(name)
        self.emit({"type": "step_succeeded", "step": name, "detail": detail})

    def register(self, name: str, undo: Callable[[], object]) -> None:
        self._undo.append((name, undo))

    def compensate(self) -> list[CompensationRecord]:
        records = []
        while self._undo:
            name, undo = self._undo.pop()
            try:
                if undo() is False:
                    continue  # it found nothing of this run's to undo
                record = CompensationRecord(name, ok=True)
            except Exception as exc:  # keep undoing the rest; the record says what is left behind
                text = str(exc) if isinstance(exc, DeliveryError) else strip_credentials(repr(exc))
                record = CompensationRecord(name, ok=False, error=text)
            records.append(record)
            self.emit({"type": "compensation", "name": name, "ok": record.ok, "error": record.error})
        return records

    def emit(self, event: dict[str, Any]) -> None:
        logger.log(logging.WARNING if event.get("error") else logging.INFO, "delivery: %s", event)
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:  # a broken progress display must not turn into a half delivery
            logger.exception("delivery: on_event failed for %s", event.get("type"))
