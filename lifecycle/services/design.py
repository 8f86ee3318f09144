"""Design: the architect's spec and ADRs, the tech lead's review loop, the implementation plan."""
from __future__ import annotations

from django.conf import settings
from django.utils.text import slugify

from agents.schemas import ImplementationPlanOutput, ReviewVerdict, TechnicalSpecOutput
from lifecycle import step_keys
from lifecycle.actors import Actor
from lifecycle.models import ImplementationTask, Requirement
from lifecycle.services.artifacts import artifact_store, latest
from lifecycle.services.development import next_attempt, schedule_ready_tasks
from lifecycle.services.leases import Lease, step_applying
from lifecycle.services.outbox import emit
from lifecycle.services.reviews import review_open
from lifecycle.services.scheduling import step_schedule
from lifecycle.services.transitions import transition
from lifecycle.states import ArtifactKind, RequirementState, ReviewKind

ARCHITECT = Actor.agent("tech_architect")
TECH_LEAD = Actor.agent("tech_lead")
SPEC = "technical_spec"


def architect_apply(*, lease: Lease, output: TechnicalSpecOutput) -> None:
    """Spec version n and its ADRs; the tech lead reviews version n next. In development (a code review found
    the spec inconsistent) the revision goes straight to the engineer's fix, whose code the tech lead reviews
    again against it: the table has no in_review/in_development → design edge, and none is needed."""
    with step_applying(lease) as (step, requirement):
        requirement.design_round = lease.attempt
        requirement.save(update_fields=["design_round"])
        spec = output.model_dump(exclude={"adrs"})
        artifact_store(requirement, kind=ArtifactKind.TECHNICAL_SPEC, name=SPEC, content=spec, summary=output.summary,
                       metadata={"round": lease.attempt}, step=step, role=ARCHITECT.role)
        for adr in output.adrs:
            artifact_store(requirement, kind=ArtifactKind.ADR, name=slugify(adr.title)[:200], content=adr.model_dump(),
                           summary=adr.decision, metadata={"round": lease.attempt}, step=step, role=ARCHITECT.role)
        emit(requirement, "SpecProduced", {"round": lease.attempt, "adrs": len(output.adrs)})
        if requirement.state == RequirementState.IN_DEVELOPMENT:
            emit(requirement, "SpecRevisedInDevelopment", {"round": lease.attempt})
            next_attempt(requirement)
        else:
            step_schedule(requirement_id=requirement.pk, key=step_keys.DESIGN_REVIEW, attempt=lease.attempt)


def design_review_apply(*, lease: Lease, output: ReviewVerdict) -> None:
    """Approve → design_ready; revise → another architect round, at most N, then a human decides."""
    with step_applying(lease) as (step, requirement):
        artifact_store(requirement, kind=ArtifactKind.REVIEW, name="design_review", content=output.model_dump(),
                       summary=f"{output.verdict}: {output.reasoning}", metadata={"round": lease.attempt,
                       "verdict": output.verdict}, step=step, role=TECH_LEAD.role)
        if output.verdict == "approve":
            spec_approve(requirement, actor=TECH_LEAD)
        elif lease.attempt < settings.AITEAM_MAX_DESIGN_ROUNDS:
            emit(requirement, "SpecRevisionRequested", {"round": lease.attempt + 1, "notes": output.notes})
            step_schedule(requirement_id=requirement.pk, key=step_keys.ARCHITECT, attempt=lease.attempt + 1)
        else:
            review_open(
                requirement, kind=ReviewKind.DESIGN_REVIEW, round=lease.attempt,
                question=f"The tech lead sent the spec back {lease.attempt} times. Approve it as it is, request "
                "changes with your feedback (one more architect round), or reject to cancel.",
                reasoning=output.reasoning, context={"notes": output.notes, "spec_summary": _spec_summary(requirement)},
                resume_target=step_keys.ARCHITECT,
            )


def spec_approve(requirement: Requirement, *, actor: Actor) -> None:
    """Mark the latest spec approved and move to design_ready (the guard also wants approved stories)."""
    spec = latest(requirement, ArtifactKind.TECHNICAL_SPEC, SPEC)
    spec.approved = True
    spec.save(update_fields=["approved"])
    transition(requirement, "approve_design", actor=actor, metadata={"spec_version": spec.version})
    emit(requirement, "DesignApproved", {"spec_version": spec.version})
    step_schedule(requirement_id=requirement.pk, key=step_keys.before_plan(on_repository=bool(requirement.base_sha)),
                  attempt=1)


def plan_apply(*, lease: Lease, output: ImplementationPlanOutput) -> None:
    """Plan rows + artifact → in_development, attempt 1: the tasks without dependencies start now."""
    with step_applying(lease) as (step, requirement):
        ImplementationTask.objects.bulk_create(
            ImplementationTask(requirement=requirement, position=i, **task.model_dump())
            for i, task in enumerate(output.tasks, start=1)
        )
        artifact_store(requirement, kind=ArtifactKind.IMPLEMENTATION_PLAN, name="plan", content=output.model_dump(),
                       summary=f"{len(output.tasks)} tasks", step=step, role=TECH_LEAD.role)
        transition(requirement, "start_development", actor=TECH_LEAD, metadata={"tasks": len(output.tasks)})
        requirement.dev_attempts = 1
        requirement.save(update_fields=["dev_attempts"])
        emit(requirement, "DevelopmentStarted", {"attempt": 1})
        schedule_ready_tasks(requirement, attempt=1)


def _spec_summary(requirement: Requirement) -> str:
    spec = latest(requirement, ArtifactKind.TECHNICAL_SPEC, SPEC)
    return spec.summary if spec else ""
