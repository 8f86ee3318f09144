"""Review tasks for inbox, SLA and dashboard tests: opened through the real service, or in bulk for volume."""
from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from lifecycle.models import Project, Requirement, ReviewTask, UserStory
from lifecycle.services.reviews import review_open
from lifecycle.services.sla_policies import policy_for

STATE_FOR_KIND = {"stories_approval": "user_stories_created", "clarification": "blocked", "step_failed": "received",
                  "escalation": "clarified"}


def open_review(project: Project, *, kind: str = "stories_approval", title: str = "Reading list", stories: int = 2,
                context: dict | None = None, reasoning: str = "") -> ReviewTask:
    """A requirement waiting on one review task, opened by review_open (its SLA policy included)."""
    with transaction.atomic():
        req = Requirement.objects.create(organization=project.organization, project=project, brief=f"brief of {title}",
                                         title=title, state=STATE_FOR_KIND.get(kind, "received"), story_round=1)
        pinned = []
        for position in range(1, stories + 1 if kind == "stories_approval" else 1):
            story = UserStory.objects.create(
                requirement=req, round=1, position=position, title=f"Story {position}", as_a="reader",
                i_want=f"feature {position}", so_that="I read more", acceptance_criteria=[f"criterion {position}"],
                priority="must", story_points=3)
            pinned.append({f: getattr(story, f) for f in ("title", "as_a", "i_want", "so_that", "acceptance_criteria",
                                                          "priority", "story_points")})
        context = context if context is not None else ({"stories": pinned} if pinned else {"questions": ["Which users?"]})
        return review_open(req, kind=kind, round=1, question=f"Decide {title}?", reasoning=reasoning, context=context)


def age(task: ReviewTask, hours: float) -> ReviewTask:
    """Move the task `hours` into the past, as if it had been opened that long ago."""
    shift = timedelta(hours=hours)
    fields = {"created_at": task.created_at - shift, "sla_deadline": task.sla_deadline - shift}
    for name in ("next_sweep_at", "decide_by"):
        if getattr(task, name) is not None:
            fields[name] = getattr(task, name) - shift
    ReviewTask.objects.filter(pk=task.pk).update(**fields)
    return ReviewTask.objects.get(pk=task.pk)


def bulk_tasks(project: Project, count: int, *, overdue_every: int = 0, requirement: Requirement | None = None,
               batch: int = 5000) -> Requirement:
    """`count` pending stories tasks on one requirement (rounds 1…count); every `overdue_every`-th is overdue."""
    now = timezone.now()
    req = requirement or Requirement.objects.create(organization=project.organization, project=project, brief="volume",
                                                    title="Volume", state="user_stories_created")
    fields = policy_for("stories_approval").fields_for_new_task(now)
    rows = []
    for i in range(1, count + 1):
        overdue = overdue_every and i % overdue_every == 0
        shift = timedelta(hours=30) if overdue else timedelta(0)
        rows.append(ReviewTask(
            organization_id=project.organization_id, requirement=req, kind="stories_approval", round=i,
            question=f"task {i}", options=["approve", "reject", "request_changes"],
            **{**fields, "sla_deadline": fields["sla_deadline"] - shift, "next_sweep_at": fields["next_sweep_at"] - shift},
        ))
    ReviewTask.objects.bulk_create(rows, batch_size=batch)
    return req
