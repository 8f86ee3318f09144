"""Delivery: push the approved branch (and open a pull request) as a saga; success → deployed.

The saga itself (agents/delivery) runs in the worker outside any transaction and is
idempotent, so a worker killed mid-push is simply run again by the reaper. This module
builds its plan from the project's settings and records its result.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.delivery import DeliveryPlan
from agents.delivery.pr_body import change_body, change_title
from lifecycle import step_keys
from lifecycle.actors import Actor
from lifecycle.contexts import from_ticket, ticket_of
from lifecycle.failure_rules import Failure, Source
from lifecycle.models import Artifact, Requirement
from lifecycle.services.artifacts import artifact_store, content_json, latest
from lifecycle.services.change_facts import change_scope, change_tests, ticket_ref
from lifecycle.services.development import workspace_aligned, workspace_for
from lifecycle.services.host_settings import github_settings, gitlab_settings
from lifecycle.services.leases import Lease, lock_for_apply, step_finish
from lifecycle.services.outbox import emit
from lifecycle.services.repositories import host_auth, project_remote
from lifecycle.services.routing import step_failure_route_locked
from lifecycle.services.scope_guard import scope_limits
from lifecycle.services.transitions import transition
from lifecycle.states import ArtifactKind

DELIVERY = Actor.system("delivery")


def delivery_plan(requirement_id) -> DeliveryPlan:
    requirement = Requirement.objects.select_related("project", "organization").get(pk=requirement_id)
    if requirement.base_sha:
        return _repository_plan(requirement)
    workspace = workspace_for(requirement)
    return DeliveryPlan(
        workspace=workspace.path, branch=workspace.branch, remote=project_remote(requirement.project),
        base=requirement.project.base_branch, github=github_settings(requirement.project),
        title=f"aiteam: {requirement.title or requirement.brief[:60]}", body=_pull_body(requirement),
        last_pushed=last_pushed(requirement),
    )


def _repository_plan(requirement: Requirement) -> DeliveryPlan:
    """On an existing repository: the branch pushed back to the repository it came from with the host's token (in
    git's environment only), and a pull or merge request, draft unless the project's settings["draft"] is false,
    whose body links the ticket and lists the scope and the tests before and after (docs/adr/0035)."""
    project, ticket = requirement.project, ticket_ref(requirement)
    workspace = workspace_aligned(requirement.pk)
    draft = project.settings.get("draft", True) is not False
    github, gitlab = github_settings(project, draft=draft), gitlab_settings(project, draft=draft)
    repository = gitlab.project if gitlab else github.repository if github else ""
    body = change_body(host="gitlab" if gitlab else "github", repository=repository, ticket=ticket,
                       scope=change_scope(workspace.change().scope, scope_limits(project)),
                       tests=change_tests(requirement), branch=workspace.branch)
    return DeliveryPlan(
        workspace=workspace.path, branch=workspace.branch, remote=project_remote(project), base=project.base_branch,
        github=github, gitlab=gitlab, title=change_title(ticket, requirement.title or requirement.brief[:60]),
        body=body, auth=host_auth(project), last_pushed=last_pushed(requirement),
    )


def last_pushed(requirement: Requirement) -> str:
    """The commit the branch's last successful delivery pushed: the only one a new push may replace (a rework
    reset the branch), under a lease on it; any other commit on the remote branch is someone's work. A tracker's
    ticket names its branch by its key: an earlier, finished run of the same issue in the project pushed it too, so
    an issue run again replaces its own earlier delivery, never a commit someone added on top."""
    runs = Requirement.objects.filter(pk=requirement.pk)
    if requirement.branch:
        runs = Requirement.objects.filter(project_id=requirement.project_id, branch=requirement.branch)
    rows = Artifact.objects.filter(requirement__in=runs, kind=ArtifactKind.DELIVERY,
                                   metadata__succeeded=True).select_related("blob")
    newest = rows.order_by("-created_at", "-version").first()
    return str(content_json(newest).get("head_commit") or "") if newest else ""


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
        emit(requirement, "Deployed", {"branch": output["branch"], "remote": output["remote_url"],
                                       "pull_request": output.get("pull_request")})
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
