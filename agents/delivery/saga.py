"""Deliver an approved branch: push it, then (where the host is configured) open its pull request (GitHub) or merge
request (GitLab), or reuse the one open from the branch.

A saga: each forward step registers how to undo what it did before the next step runs; when
a later step fails, the registered undos run newest first and each outcome is recorded (an undo
that finds nothing of this run's to undo records nothing), so a failed delivery leaves the remote
as it found it. Undos are registered before the call they undo: a push or a pull request that
the host or git carried out although the answer never came (a timeout) is undone too. Only what this run did is undone: a branch
that was already on the remote at this commit, or a pull request that was already open,
belongs to an earlier run and is kept.

That same rule makes a re-run after a crash idempotent: the push finds its commit already
there (a no-op) and the pull request step finds the open PR and reuses it, so a delivery
retried any number of times pushes once and opens one pull request.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.delivery import git_remote
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
    change = host.find_open(plan.branch)
    if change is None:
        answer: dict[str, Any] = {}  # "change": the one the host opened; "refused": the host answered it opened none

        def close_opened() -> bool:
            if answer.get("refused"):
                return False  # one open now is someone else's (a 422/409 "already exists" races one)
            # The host may have opened it although its answer never came (a timeout, the soft limit): look it up
            found = answer.get("change") or host.find_open(plan.branch)
            if found:
                host.close(found.number)
            return bool(found)

        # Registered before opening, like the push's undo: a retry must not find a stray one of this run
        saga.register(f"close {host.noun}", close_opened)
        try:
            answer["change"] = change = host.open(plan.branch, plan.base, plan.title or f"Deliver {plan.branch}",
                                                  plan.body)
        except NoAnswer:
            raise
        except DeliveryError:
            answer["refused"] = True
            raise
    result.pull_request = {"number": change.number, "url": change.url, "reused": change.reused, "draft": change.draft,
                           "kind": host.noun, "host": host.host}
    return f"{'reused' if change.reused else 'opened'} {host.noun} #{change.number}"


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
