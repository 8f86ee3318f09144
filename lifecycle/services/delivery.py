"""Delivery: push the approved branch (and open a pull request) as a saga; success → deployed.

The saga itself (agents/delivery) runs in the worker outside any transaction and is
idempotent, so a worker killed mid-push is simply run again by the reaper. This module
builds its plan from the project's settings and records its result.
"""
from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.db import transaction

from agents.delivery import DeliveryPlan, GitHubSettings
from lifecycle import step_keys
from lifecycle.actors import Actor
from lifecycle.contexts import from_ticket, ticket_of
from lifecycle.errors import DomainError
from lifecycle.failure_rules import Failure, Source
from lifecycle.models import Project, Requirement
from lifecycle.repo_settings import HostKind
from lifecycle.services.artifacts import artifact_store, latest
from lifecycle.services.development import workspace_for
from lifecycle.services.leases import Lease, lock_for_apply, step_finish
from lifecycle.services.outbox import emit
from lifecycle.services.repositories import project_remote
from lifecycle.services.routing import step_failure_route_locked
from lifecycle.services.transitions import transition
from lifecycle.states import ArtifactKind

DELIVERY = Actor.system("delivery")


def delivery_plan(requirement_id) -> DeliveryPlan:
    requirement = Requirement.objects.select_related("project", "organization").get(pk=requirement_id)
    workspace = workspace_for(requirement)
    return DeliveryPlan(
        workspace=workspace.path, branch=workspace.branch, remote=project_remote(requirement.project),
        base=requirement.project.base_branch, github=_github(requirement.project),
        title=f"aiteam: {requirement.title or requirement.brief[:60]}", body=_pull_body(requirement),
    )


def deliver_apply(*, lease: Lease, output: dict[str, Any]) -> None:
    with transaction.atomic():
        step, requirement = lock_for_apply(lease)
        artifact_store(requirement, kind=ArtifactKind.DELIVERY, name="delivery", content=output,
                       summary=output.get("error") or f"{output['branch']} → {output['remote_url']}",
                       metadata={"succeeded": output["succeeded"], "attempt": lease.attempt}, step=step,
                       role=DELIVERY.role)
        if not output["succeeded"]:
            emit(requirement, "DeliveryFailed", {"error": output["error"], "compensations": output["compensations"]})
            failure = _delivery_failure(output)
            step_failure_route_locked(lease=lease, step=step, requirement=requirement, summary=failure.error,
                                      failure=failure)
            return
        transition(requirement, "deploy", actor=DELIVERY, metadata={"branch": output["branch"],
                                                                    "pull_request": output.get("pull_request")})
        emit(requirement, "Deployed", {"branch": output["branch"], "remote": output["remote_url"]})
        step_finish(step)


def _delivery_failure(output: dict[str, Any]) -> Failure:
    """git or GitHub refused: infrastructure, retried with backoff, then an operator. A remote the operator's rule
    refuses (a stored repo_url that no longer passes) is permanent: no rule retries it, a person changes it."""
    if output.get("refused"):
        error = (f"delivery refused before any git command: {output['error']}. An admin of the organization sets the "
                 "project's repo_url to an allowed remote (docs/operations.md, Delivery), then retries.")
        return Failure(source=Source.STEP, step=step_keys.DELIVER, error_classes=("RemoteRefused",), error=error)
    error = f"delivery failed, compensated: {output['error']}"
    return Failure(source=Source.STEP, step=step_keys.DELIVER, error_classes=("DeliveryError",), error=error)


def _github(project: Project) -> GitHubSettings | None:
    """A pull request on a GitHub project whose settings name the repository. Which token is sent, and to which
    API, the operator decides: a tenant must not be able to point the worker's secrets at a URL of its choosing.
    The allow-lists are read again here: the operator may have narrowed them since the project was saved."""
    config = project.settings.get("github") or {}
    if project.host_kind != HostKind.GITHUB or not config.get("repository"):
        return None
    api_url = config.get("api_url", "https://api.github.com")
    if not project.token_env:
        raise DomainError("a pull request needs a token: set the project's token_env", "token_env")
    if project.token_env not in settings.AITEAM_TOKEN_ENVS:
        raise DomainError(f"token_env {project.token_env!r} is not one of the operator's AITEAM_TOKEN_ENVS",
                          "token_env")
    if api_url not in settings.AITEAM_GITHUB_API_URLS:
        raise DomainError(f"api_url {api_url!r} is not one of the operator's AITEAM_GITHUB_API_URLS", "settings")
    return GitHubSettings(repository=config["repository"], token=os.environ.get(project.token_env, ""), api_url=api_url)


def _pull_body(requirement: Requirement) -> str:
    qc = latest(requirement, ArtifactKind.TEST_REPORT, "qc")
    tests = latest(requirement, ArtifactKind.TEST_REPORT, "self_test")
    return (f"Requirement {requirement.pk}\n\n{_what_was_built(requirement)}\n\n## Tests\n"
            f"- self-tests: {tests.summary if tests else '-'}\n- QC: {qc.summary if qc else '-'}\n")


def _what_was_built(requirement: Requirement) -> str:
    """The stories and spec, or for a bug fix (no stories, no spec) the ticket and its acceptance criteria."""
    if from_ticket(requirement):
        ticket = ticket_of(requirement)
        return f"## Ticket\n{ticket.summary}\n\n" + "\n".join(f"- {c}" for c in ticket.acceptance_criteria)
    stories = "\n".join(f"- {s.title}" for s in requirement.stories.filter(round=requirement.story_round))
    spec = latest(requirement, ArtifactKind.TECHNICAL_SPEC, "technical_spec")
    return f"## Stories\n{stories}\n\n## Spec\n{spec.summary if spec else '-'} (artifact {spec.pk if spec else '-'})"
