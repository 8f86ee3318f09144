"""Apply the Product Owner's and the Business Analyst's outputs: one fenced transaction each."""
from __future__ import annotations

from agents.schemas import BusinessAnalystOutput, ProductOwnerOutput
from lifecycle import step_keys
from lifecycle.actors import Actor
from lifecycle.models import Requirement, RequirementDoc, UserStory
from lifecycle.playbooks import playbook_named
from lifecycle.services.leases import Lease, step_applying
from lifecycle.services.outbox import emit
from lifecycle.services.reviews import review_open
from lifecycle.services.scheduling import step_schedule
from lifecycle.services.transitions import transition
from lifecycle.states import ReviewKind

PRODUCT_OWNER = Actor.agent("product_owner")
BUSINESS_ANALYST = Actor.agent("business_analyst")


def product_owner_apply(*, lease: Lease, output: ProductOwnerOutput) -> None:
    """A clear brief becomes a RequirementDoc (→ clarified); a vague one a clarification task (→ blocked)."""
    with step_applying(lease) as (step, requirement):
        meta = {"step": step.pk, "fence": lease.fence}
        if output.verdict == "clear":
            RequirementDoc.objects.create(
                requirement=requirement, version=requirement.clarification_round, summary=output.summary,
                objectives=output.objectives, out_of_scope=output.out_of_scope, assumptions=output.assumptions,
                constraints=output.constraints, success_metrics=output.success_metrics,
                acceptance_criteria=output.acceptance_criteria,
            )
            transition(requirement, "clarify", actor=PRODUCT_OWNER, metadata=meta)
            _hand_over(requirement, meta)
        else:
            review_open(
                requirement, kind=ReviewKind.CLARIFICATION, round=requirement.clarification_round,
                question="The brief is too vague to write a requirement from. Please answer:\n- "
                + "\n- ".join(output.clarifying_questions),
                reasoning=output.reasoning,
                context={"questions": output.clarifying_questions, "brief": requirement.brief},
                resume_target="po_clarify",
            )
            transition(requirement, "block", actor=PRODUCT_OWNER, metadata=meta)


def _hand_over(requirement: Requirement, meta: dict) -> None:
    """new_feature: the BA writes stories next. bug_fix: the clarified ticket goes straight to the Tech Lead's
    plan (clarified → design_ready, its own audited transition; the guard wants acceptance criteria)."""
    if playbook_named(requirement.playbook).writes_stories:
        emit(requirement, "RequirementClarified", {"round": requirement.story_round + 1})
        return
    transition(requirement, "accept_ticket", actor=PRODUCT_OWNER, metadata=meta)
    emit(requirement, "TicketAccepted", {"round": requirement.clarification_round})
    step_schedule(requirement_id=requirement.pk, key=step_keys.PLAN, attempt=1)


def business_analyst_apply(*, lease: Lease, output: BusinessAnalystOutput) -> None:
    """Stories for this round (→ user_stories_created) and a stories_approval task for a human."""
    with step_applying(lease) as (step, requirement):
        stories = UserStory.objects.bulk_create(
            UserStory(requirement=requirement, round=lease.attempt, position=i, **story.model_dump())
            for i, story in enumerate(output.stories, start=1)
        )
        requirement.story_round = lease.attempt
        review_open(
            requirement, kind=ReviewKind.STORIES_APPROVAL, round=lease.attempt,
            question=f"Approve these {len(stories)} user stories (round {lease.attempt})?",
            reasoning=output.reasoning,
            context={"stories": [story.model_dump() for story in output.stories]},
            resume_target="tech_architect",
        )
        transition(requirement, "create_stories", actor=BUSINESS_ANALYST, metadata={"step": step.pk, "stories": len(stories)})
