"""A step that cannot finish becomes a question for a human, never a silent loss; every failure's route is
recorded with its trace (lifecycle.failure_rules decides it)."""
from __future__ import annotations

from dataclasses import replace

from lifecycle.failure_rules import (
    INTERNAL_ERROR,
    INVALID_MODEL_OUTPUT,
    REPOSITORY_UNUSABLE,
    Failure,
    Routing,
    Source,
    classify,
)
from lifecycle.models import FailureRoute, Requirement, ReviewTask, Step
from lifecycle.services.meta_eval import failure_route_judged
from lifecycle.services.reviews import review_open
from lifecycle.states import ReviewKind, StepState
from lifecycle.step_keys import FIX, kind_of

SUMMARY_MAX = 500
ERRORS_SHOWN_MAX = 1500


def open_step_failed_task(step: Step) -> ReviewTask:
    """Ask whether to run a failed step again. The step's route, recorded just before in this transaction,
    says what happened: the model's output stayed invalid, our own code failed, or something else."""
    requirement = Requirement.objects.select_for_update().get(pk=step.requirement_id)  # serializes the round count
    route = FailureRoute.objects.filter(step=step).order_by("-id").first()
    return review_open(
        requirement, kind=ReviewKind.STEP_FAILED,
        question=f"{_what_happened(step, route)} Approve to run it again, or reject to cancel the requirement.",
        reasoning=step.error, resume_target=step.key,
        context={"step_id": step.pk, "step": step.key, "error": step.error, "rule": route.rule if route else ""},
    )


def _what_happened(step: Step, route: FailureRoute | None) -> str:
    where = f"Step '{step.key}' (attempt {step.attempt})"
    rule, facts = (route.rule, route.facts) if route is not None else ("", {})
    if rule == INVALID_MODEL_OUTPUT:
        errors = "; ".join(facts.get("validation_errors", ()))[:ERRORS_SHOWN_MAX]
        return (f"{where}: invalid model output. The model's answer stayed invalid after {facts.get('repairs', 0)} "
                f"repair(s); the last validation errors: {errors or 'none recorded'}.")
    if rule == INTERNAL_ERROR:
        error_type = next(iter(facts.get("error_classes", ())), "an exception")
        return (f"{where}: internal error. A bug in aiteam's own code raised {error_type}; neither the model's "
                "answer nor the tools are at fault, and running it again is likely to fail the same way until the code is fixed.")
    if rule == REPOSITORY_UNUSABLE:
        return (f"{where}: the repository cannot be prepared as it stands (the reason and the log's tail are below); "
                "fix the repository or the project's settings first, running it again changes nothing until then.")
    return f"{where} failed after {step.runs} run(s)."


def step_given_up(step: Step) -> None:
    """A step whose runs all ended without an outcome (its workers kept dying), closed as failed by the caller:
    routed like any failure, and an operator asked."""
    failure = Failure(Source.STEP, kind_of(step.key), ("WorkerLost",), error=step.error[:1000])
    failure_route_record(requirement=step.requirement, failure=failure, routing=classify(failure), step=step,
                         summary=step.error, action="step failed: a step_failed review task asks an operator")
    open_step_failed_task(step)


def failure_with_history(*, requirement: Requirement, failure: Failure) -> Failure:
    """The failure with its history filled in: the previous failure of the same source, and whether a fix ran since."""
    previous = FailureRoute.objects.filter(requirement=requirement, source=failure.source).order_by("-id").first()
    if previous is None:
        return failure
    fixed = Step.objects.filter(requirement=requirement, key=FIX, state=StepState.DONE,
                                finished_at__gte=previous.created_at).exists()
    return replace(failure, previous_signature=previous.signature, after_fix=fixed)


def failure_route_record(
    *, requirement: Requirement, failure: Failure, routing: Routing, summary: str, action: str, step: Step | None = None,
) -> FailureRoute:
    """Inside the caller's transaction, the one that carries out the route; it judges the route before it."""
    route = FailureRoute.objects.create(
        organization_id=requirement.organization_id, requirement=requirement, step=step, source=failure.source,
        summary=summary[:SUMMARY_MAX], signature=failure.signature, route=routing.route, rule=routing.first,
        matched=list(routing.matched), trace=list(routing.trace), facts=failure.to_dict(), action=action[:300],
    )
    failure_route_judged(route)
    return route
