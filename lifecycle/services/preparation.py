"""An existing repository's preparation (docs/adr/0035): the base commit recorded, the BASELINE artifact (the test
command, the environment, both base runs' outcomes, the flaky tests), and clarification scheduled next. A
repository that cannot be prepared as it stands is a failed step for a person, with the reason and the log's tail.

The work itself (mirror, workspace, environment, the two sandboxed runs) happens in the runner, outside any
transaction (lifecycle/runner.py `_repo_prepare`); these services record what it found.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction

from lifecycle import step_keys
from lifecycle.actors import Actor
from lifecycle.errors import IllegalTransition
from lifecycle.failure_rules import Failure, Source
from lifecycle.models import Requirement
from lifecycle.services.artifacts import artifact_store, content_json, latest
from lifecycle.services.leases import Lease, lock_for_apply, step_finish
from lifecycle.services.outbox import emit
from lifecycle.services.routing import step_failure_route_locked
from lifecycle.services.scheduling import step_schedule
from lifecycle.states import ArtifactKind, RequirementState

SANDBOX = Actor.system("sandbox")
BASELINE_NAME = "baseline"
UNUSABLE_CLASS = "RepositoryUnusable"  # lifecycle/failure_rules.py REPOSITORY_ERRORS: a person, never a retry
TAIL_SHOWN = 1500  # of the log's tail, in the step's error (the artifact keeps it whole)


class RepositoryUnusable(Exception):
    """The repository cannot be prepared as it stands (a refused remote, no base branch): a person fixes it."""


def base_record(*, requirement_id: Any, sha: str) -> str:
    """Record the base commit once (a conditional update: the first run's wins) and return the recorded one, so a
    step run again after a crash branches from the same commit, whatever the base branch did meanwhile."""
    Requirement.objects.filter(pk=requirement_id, base_sha="").update(base_sha=sha)
    return Requirement.objects.values_list("base_sha", flat=True).get(pk=requirement_id)


def unusable(reason: str, *, error: BaseException | str, log_tail: str = "") -> dict[str, Any]:
    """The output of a preparation that cannot go on: recorded, and the step failed for a person."""
    name = error if isinstance(error, str) else type(error).__name__
    return {"ok": False, "error_class": name, "reason": reason, "log_tail": log_tail}


def repo_prepare_apply(*, lease: Lease, output: dict[str, Any]) -> None:
    """Store the baseline and go on to clarification; or, for a repository that cannot be prepared, store why
    and fail the step for a person."""
    with transaction.atomic():
        step, requirement = lock_for_apply(lease)
        if requirement.state != RequirementState.RECEIVED:  # cancelled meanwhile: nothing to prepare for
            raise IllegalTransition(f"requirement is {requirement.state}: its preparation no longer applies")
        if not output["ok"]:
            artifact_store(requirement, kind=ArtifactKind.BASELINE, name=BASELINE_NAME, content=output,
                           summary=output["reason"], metadata={"ok": False, "error_class": output["error_class"]},
                           step=step, role=SANDBOX.role)
            failure = _failure(output)
            step_failure_route_locked(lease=lease, step=step, requirement=requirement, failure=failure,
                                      summary=failure.error)
            return
        if not requirement.base_sha:  # recorded by the run already, unless a replay applies a recorded output
            requirement.base_sha = output["base_sha"]
            requirement.save(update_fields=["base_sha"])
        counts = output["counts"]
        artifact_store(requirement, kind=ArtifactKind.BASELINE, name=BASELINE_NAME, content=output,
                       summary=_summary(output), step=step, role=SANDBOX.role,
                       metadata={"ok": True, "base_sha": output["base_sha"], "branch": output["branch"],
                                 "test_command": output["test_command"]["shown"], "flaky": len(output["flaky"]),
                                 "environment_key": output["environment"]["key"], **counts})
        emit(requirement, "RepositoryPrepared", {"base_sha": output["base_sha"], "branch": output["branch"],
                                                 "tests": counts})
        step_finish(step)
        step_schedule(requirement_id=requirement.pk, key=step_keys.PO_CLARIFY, attempt=requirement.clarification_round)


def baseline_of(requirement: Requirement) -> dict[str, Any]:
    """What the preparation recorded, for the runs after a change; a requirement with a base commit and no
    baseline (its preparation never finished) cannot be judged."""
    artifact = latest(requirement, ArtifactKind.BASELINE, BASELINE_NAME)
    prepared = content_json(artifact) if artifact else None
    if not prepared or not prepared.get("ok"):
        raise LookupError(f"requirement {requirement.pk} has no baseline: its repo_prepare step did not finish")
    return prepared


def qc_test_files(requirement: Requirement) -> list[str]:
    """The test files QC wrote on the branch (every round's), as the qc_tests steps stored them."""
    names = requirement.artifacts.filter(kind=ArtifactKind.TEST_FILE, step__key=step_keys.QC_TESTS).values_list(
        "name", flat=True)
    return sorted(set(names))


def _failure(output: dict[str, Any]) -> Failure:
    tail = output.get("log_tail") or ""
    shown = f"\n\nThe log's last lines:\n{tail[-TAIL_SHOWN:]}" if tail.strip() else ""
    return Failure(source=Source.STEP, step=step_keys.REPO_PREPARE, error=f"{output['reason']}{shown}",
                   error_classes=(UNUSABLE_CLASS, output["error_class"]))


def _summary(output: dict[str, Any]) -> str:
    counts, flaky = output["counts"], output["flaky"]
    return (f"{output['test_command']['shown']} ({output['test_command']['source']}) at {output['base_sha'][:10]}: "
            f"{counts['passed']} passed, {counts['failed']} failed, {counts['errors']} errors, "
            f"{counts['skipped']} skipped; {len(flaky)} flaky")
