"""Failure routing: classify a failure (lifecycle.failure_rules), record the route with its trace,
and, for failed steps, carry out the route (retry with backoff, or an operator's step_failed task).

The other sources (self-tests, code review, the quality gate) act in their own services; they call
`failure_with_history` for the decision and `failure_route_record` in the transaction that acts on it.
"""
from __future__ import annotations

from dataclasses import replace

from django.conf import settings
from django.db import transaction

from lifecycle.failure_rules import Failure, Route, Routing, Source, classify, error_classes
from lifecycle.models import FailureRoute, Requirement, Step
from lifecycle.services import steps
from lifecycle.services.steps import Lease, lock_for_apply
from lifecycle.states import StepState

SUMMARY_MAX = 500


def failure_with_history(*, requirement: Requirement, failure: Failure) -> Failure:
    """The failure with its history filled in: the previous failure of the same source, and whether a fix ran since."""
    previous = FailureRoute.objects.filter(requirement=requirement, source=failure.source).order_by("-id").first()
    if previous is None:
        return failure
    fixed = Step.objects.filter(requirement=requirement, key=steps.FIX, state=StepState.DONE,
                                finished_at__gte=previous.created_at).exists()
    return replace(failure, previous_signature=previous.signature, after_fix=fixed)


def failure_route_record(
    *, requirement: Requirement, failure: Failure, routing: Routing, summary: str, action: str, step: Step | None = None,
) -> FailureRoute:
    """Inside the caller's transaction, the one that carries out the route."""
    return FailureRoute.objects.create(
        organization_id=requirement.organization_id, requirement=requirement, step=step, source=failure.source,
        summary=summary[:SUMMARY_MAX], signature=failure.signature, route=routing.route, rule=routing.first,
        matched=list(routing.matched), trace=list(routing.trace), facts=failure.to_dict(), action=action[:300],
    )


def step_failure_route(*, lease: Lease, exc: BaseException, error: str, resend: bool) -> Route:
    """A step raised: retry it with backoff while the error is infrastructure and the step has runs left,
    else an operator decides (step_failed task). `resend`: queue the retry here (the failure came while
    applying the output); otherwise the caller re-sends it through Celery's retry. Raises StaleStep when
    the lease is no longer current (nothing is recorded then)."""
    with transaction.atomic():
        step, requirement = lock_for_apply(lease)  # the requirement first, as decisions lock (steps._REQUIREMENT_FIRST)
        failure = Failure(source=Source.STEP, step=lease.kind, error_classes=error_classes(exc), error=error[:1000])
        return step_failure_route_locked(
            lease=lease, step=step, requirement=requirement, failure=failure,
            summary=f"{lease.key} (attempt {lease.attempt}): {error}", resend=resend,
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
        steps.step_release(lease, error=failure.error, retry_in_s=delay)
        if resend:
            transaction.on_commit(lambda: _resend(step, delay), robust=True)
    else:
        action = "step failed: a step_failed review task asks an operator to retry or cancel"
        steps.step_fail(lease, error=failure.error)
    failure_route_record(requirement=requirement, failure=failure, routing=routing, step=step, summary=summary,
                         action=action)
    return routing.route


def retry_delay_s(runs: int) -> int:
    """Backoff before run `runs + 1`, as run_step's own retries use; none when Celery runs eagerly."""
    from agents.tasks import backoff_seconds  # the task module owns the retry policy

    return 0 if settings.CELERY_TASK_ALWAYS_EAGER else backoff_seconds(max(runs - 1, 0))


def _resend(step: Step, delay: int) -> None:
    from agents.tasks import run_step

    run_step.apply_async((step.pk,), queue=steps.queue_for(step.key), countdown=delay)


