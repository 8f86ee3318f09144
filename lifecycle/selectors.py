"""Read-side queries: what a user may see, and the contexts handed to agents."""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from agents.schemas import (
    BugTicketContext,
    BusinessAnalystContext,
    ProductOwnerContext,
    RequirementDocView,
    StoryFeedback,
)
from aiteam.db import by_pk
from lifecycle.models import Requirement, ReviewTask
from lifecycle.playbooks import playbook_named
from lifecycle.states import Decision, ReviewKind, ReviewState


def requirements_visible_to(user: Any) -> QuerySet[Requirement]:
    return Requirement.objects.filter(organization__memberships__user=user)


def review_tasks_visible_to(user: Any) -> QuerySet[ReviewTask]:
    return ReviewTask.objects.filter(organization__memberships__user=user)


def product_owner_context(requirement_id) -> ProductOwnerContext:
    """A brief, or (in a playbook without stories) a bug ticket: the context's type picks the PO's job."""
    req = Requirement.objects.select_related("project").get(pk=requirement_id)
    context = ProductOwnerContext if playbook_named(req.playbook).writes_stories else BugTicketContext
    return context(title=req.title, brief=req.brief, project=req.project.name, clarifications=req.clarifications)


def business_analyst_context(requirement_id, round: int) -> BusinessAnalystContext:
    req = by_pk.get(Requirement, requirement_id)
    doc = req.docs.order_by("-version").first()
    view = RequirementDocView(
        summary=doc.summary, objectives=doc.objectives, out_of_scope=doc.out_of_scope,
        assumptions=doc.assumptions, constraints=doc.constraints, success_metrics=doc.success_metrics,
    )
    return BusinessAnalystContext(title=req.title, brief=req.brief, doc=view, round=round, feedback=_story_feedback(req))


def _story_feedback(req: Requirement) -> list[StoryFeedback]:
    """Every earlier send-back, oldest first, so the BA reworks with all of it."""
    sent_back = req.review_tasks.filter(
        kind__in=[ReviewKind.STORIES_APPROVAL, ReviewKind.ESCALATION], state=ReviewState.RESOLVED,
        decision__in=[Decision.REJECT, Decision.REQUEST_CHANGES],
    ).order_by("created_at")
    titles = {}
    for story in req.stories.only("round", "title"):
        titles.setdefault(story.round, []).append(story.title)
    return [
        StoryFeedback(round=t.round, decision=t.decision, text=t.reason or t.feedback, story_titles=titles.get(t.round, []))
        for t in sent_back
    ]
