"""Failure routing of a step that raised: classify it (lifecycle.failure_rules), record the route with its
trace, and carry it out (retry with backoff, or an operator's step_failed task).

The other sources (self-tests, code review, the quality gate) act in their own services; they call
`failures.failure_with_history` for the decision and `failures.failure_route_record` in the transaction
that acts on it.
"""
from __future__ import annotations

from dataclasses import replace

from django.conf import settings
from django.db import transaction

from agents.llm.base import LLMOutputStillInvalid
from agents.llm.redact import redact
from lifecycle.failure_rules import Failure, Route, Source, classify, error_classes
from lifecycle.models import Requirement, Step
from lifecycle.services import dispatch
from lifecycle.services.failures import failure_route_record
from lifecycle.services.leases import Lease, lock_for_apply, step_fail, step_release


def step_failure_route(*, lease: Lease, exc: BaseException, error: str, resend: bool) -> Route:
    """A step raised: retry it with backoff while the error is infrastructure and the step has runs left,
    else a person decides (step_failed task). `resend`: queue the retry here (the failure came while
    applying the output); otherwise the caller re-sends it through Celery's retry. Raises StaleStep when
    the lease is no longer current (nothing is recorded then)."""
    with transaction.atomic():
        step, requirement = lock_for_apply(lease)
        return step_failure_route_locked(
            lease=lease, step=step, requirement=requirement, failure=step_raised(kind=lease.kind, exc=exc, error=error),
            summary=f"{lease.key} (attempt {lease.attempt}): {error}", resend=resend,
        )


def step_raised(*, kind: str, exc: BaseException, error: str) -> Failure:
    """The facts of a step that raised; output that stayed invalid brings its repairs and last validation errors."""
    invalid = exc if isinstance(exc, LLMOutputStillInvalid) else None
    return Failure(
        source=Source.STEP, step=kind, error_classes=error_classes(exc), error=error[:1000],
        repairs=invalid.repairs if invalid else 0,
        validation_errors=tuple(redact(f"{e['loc']}: {e['msg']}" if e["loc"] else e["msg"])[:1000]
                                for e in invalid.errors) if invalid else (),
    )


def step_failure_route_locked(
    *, lease: Lease, step: Step, requirement: Requirement, failure: Failure, summary: str, resend: bool = True,
) -> Route:
    """Inside the caller's transaction, the step locked under `lease`: classify a failed step (also one whose
    output reports a failure, such as a refused delivery), then release it for a retry or fail it."""
    failure = replace(failure, runs_left=max(settings.AITEAM_STEP_MAX_RUNS - step.runs, 0))
    routing = classify(failure)
    if routing.route == Route.RETRY:
        delay = retry_delay_s(step.runs)
        action = f"retry: run {step.runs + 1} of {settings.AITEAM_STEP_MAX_RUNS} in {delay} s"
        step_release(lease, error=failure.error, retry_in_s=delay)
        if resend:
            transaction.on_commit(lambda: dispatch.send_step(step.pk, step.key, countdown=delay), robust=True)
    else:
        who = "an operator" if routing.route == Route.OPERATOR else "a person"
        action = f"step failed: a step_failed review task asks {who} to retry or cancel"
    failure_route_record(requirement=requirement, failure=failure, routing=routing, step=step, summary=summary,
                         action=action)
    if routing.route != Route.RETRY:
        step_fail(lease, error=failure.error)  # after the record: the task's question names the route's rule
    return routing.route


def backoff_seconds(retries: int) -> int:
    """The wait before retry `retries + 1` of a step, here and in the runner's Celery retries."""
    return min(2 ** retries * 5, 300)


def retry_delay_s(runs: int) -> int:
    """Backoff before run `runs + 1`; none when Celery runs eagerly."""
    return 0 if settings.CELERY_TASK_ALWAYS_EAGER else backoff_seconds(max(runs - 1, 0))
