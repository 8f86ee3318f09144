"""Agent contexts for design and development, built from the database through the translators.

Each function takes ids and returns the pydantic context one agent step needs; the agent
itself never sees a model instance.
"""
from __future__ import annotations

from agents import translators
from agents.schemas import (
    ArchitectContext,
    CodeReviewContext,
    DesignReviewContext,
    DevOpsContext,
    EngineerContext,
    FixContext,
    PlanContext,
    PlannedTask,
    QCContext,
    StoryOut,
    TechnicalSpecOutput,
)
from agents.schemas.engineering import ENGINEER_MAY_NOT_WRITE
from lifecycle.models import Requirement
from lifecycle.services import steps
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.development import workspace_for
from lifecycle.states import ArtifactKind, Decision, ReviewKind, ReviewState, StoryState

TEST_COMMAND = "python -m pytest -q"
STORY_FIELDS = ["title", "as_a", "i_want", "so_that", "acceptance_criteria", "priority", "story_points"]


def approved_stories(req: Requirement) -> list[StoryOut]:
    rows = req.stories.filter(round=req.story_round, state__in=[StoryState.APPROVED, StoryState.IN_PROGRESS,
                                                                 StoryState.DONE]).values(*STORY_FIELDS)
    return [StoryOut(**row) for row in rows]


def spec_of(req: Requirement) -> TechnicalSpecOutput:
    spec = latest(req, ArtifactKind.TECHNICAL_SPEC, "technical_spec")
    adrs = req.artifacts.filter(kind=ArtifactKind.ADR, metadata__round=spec.metadata["round"]).select_related("blob")
    return TechnicalSpecOutput(**content_json(spec), adrs=[content_json(a) for a in adrs])


def architect_context(requirement_id, round: int) -> ArchitectContext:
    req = Requirement.objects.get(pk=requirement_id)
    doc = req.docs.order_by("-version").first()
    return ArchitectContext(
        title=req.title, summary=doc.summary, constraints=doc.constraints, round=round,
        requirements=translators.stories_to_requirements(approved_stories(req)), review_notes=_design_notes(req),
    )


def design_review_context(requirement_id, round: int) -> DesignReviewContext:
    req = Requirement.objects.get(pk=requirement_id)
    return DesignReviewContext(requirements=translators.stories_to_requirements(approved_stories(req)),
                               spec=spec_of(req), round=round)


def plan_context(requirement_id) -> PlanContext:
    req = Requirement.objects.get(pk=requirement_id)
    return translators.spec_to_plan_context(spec_of(req), approved_stories(req))


def engineer_context(requirement_id, task_key: str, attempt: int) -> EngineerContext:
    req = Requirement.objects.get(pk=requirement_id)
    row = req.plan_tasks.get(key=task_key)
    task = PlannedTask(key=row.key, title=row.title, story_refs=row.story_refs, files=row.files,
                       depends_on=row.depends_on, definition_of_done=row.definition_of_done)
    return translators.task_to_engineer_context(task, spec_of(req), approved_stories(req),
                                                workspace_for(req).files(), attempt)


def fix_context(requirement_id, attempt: int) -> FixContext:
    req = Requirement.objects.get(pk=requirement_id)
    report = latest(req, ArtifactKind.TEST_REPORT)  # the newest run: the engineer's self-tests or QC's gate
    review = latest(req, ArtifactKind.REVIEW, "code_review")
    failed = content_json(report) if report and not report.metadata.get("ok") else {}
    newer_review = review and (not report or review.created_at > report.created_at)
    notes = content_json(review)["notes"] if newer_review and review.metadata.get("verdict") != "approve" else []
    notes += failed.get("gate", {}).get("reasons", [])
    own = [f for f in workspace_for(req).files() if not f.path.startswith(ENGINEER_MAY_NOT_WRITE)]
    return FixContext(
        attempt=attempt, files=own, failing_tests=failed.get("failing_tests", []),
        output_tail=failed.get("output_tail", "")[-6000:], review_notes=notes, guidance=_guidance(req),
    )


def code_review_context(requirement_id, round: int) -> CodeReviewContext:
    req = Requirement.objects.get(pk=requirement_id)
    report = latest(req, ArtifactKind.TEST_REPORT, "self_test")
    diff = latest(req, ArtifactKind.DIFF_SUMMARY, "workspace")
    return CodeReviewContext(
        diff_summary=content_json(diff) if diff else [], files=workspace_for(req).files(),
        tests_passed=report.metadata.get("passed", 0) if report else 0, round=round,
        acceptance=[c for story in approved_stories(req) for c in story.acceptance_criteria],
    )


def qc_context(requirement_id) -> QCContext:
    req = Requirement.objects.get(pk=requirement_id)
    return translators.qc_context(approved_stories(req), spec_of(req), workspace_for(req).files())


def devops_context(requirement_id) -> DevOpsContext:
    req = Requirement.objects.select_related("project").get(pk=requirement_id)
    spec = spec_of(req)
    return DevOpsContext(project=req.project.name, summary=spec.summary, tech_stack=spec.tech_stack,
                         files=[f.path for f in workspace_for(req).files()], test_command=TEST_COMMAND)


def _design_notes(req: Requirement) -> list[str]:
    reviews = req.artifacts.filter(kind=ArtifactKind.REVIEW, name="design_review", metadata__verdict="revise")
    notes = [note for review in reviews.select_related("blob") for note in content_json(review)["notes"]]
    human = req.review_tasks.filter(kind=ReviewKind.DESIGN_REVIEW, state=ReviewState.RESOLVED,
                                    decision=Decision.REQUEST_CHANGES).values_list("feedback", flat=True)
    return notes + [f"From a human reviewer: {text}" for text in human]


def _guidance(req: Requirement) -> list[str]:
    """What humans said: guidance on escalations and code reviews, and reasons for refusing a deployment."""
    resolved = req.review_tasks.filter(state=ReviewState.RESOLVED).order_by("created_at")
    guided = resolved.filter(kind__in=[ReviewKind.ESCALATION, ReviewKind.CODE_REVIEW], resume_target=steps.FIX,
                             decision=Decision.REQUEST_CHANGES).values_list("feedback", flat=True)
    refused = resolved.filter(kind=ReviewKind.DEPLOYMENT_APPROVAL, decision=Decision.REJECT).values_list("reason", flat=True)
    return [*guided, *(f"Deployment refused: {reason}" for reason in refused)]
