"""A reviewer edits a draft story before approving it.

The story row takes the new text (it is what later steps build on); a StoryEdit row keeps
what it was, who changed it, when and from where; the task's pinned copy of the stories
follows, so the API and the inbox show what is actually being approved. The edit is
validated with the same schema the Business Analyst's output must pass.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction
from pydantic import ValidationError

from agents.schemas import StoryOut
from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition
from lifecycle.models import ReviewTask, StoryEdit, UserStory
from lifecycle.services.assignment import ensure_may_review, lock_task_requirement
from lifecycle.services.outbox import emit
from lifecycle.states import ReviewKind, StoryState

EDITABLE = ("title", "as_a", "i_want", "so_that", "acceptance_criteria", "priority", "story_points")


def story_edit(
    *, task_id: Any, story_id: Any, actor: Actor, changes: dict[str, Any], origin: dict[str, Any] | None = None
) -> StoryEdit | None:
    """Apply a reviewer's changes to a draft story of a pending stories task; None when nothing changed."""
    with transaction.atomic():
        lock_task_requirement(task_id)  # the requirement first, then the task: the order of every writer
        task = ReviewTask.objects.select_for_update(of=("self",)).select_related("organization", "requirement").get(
            pk=task_id)
        ensure_may_review(actor.user, task)
        if task.kind != ReviewKind.STORIES_APPROVAL or not task.is_pending:
            raise IllegalTransition("stories can be edited only while their approval task is pending")
        story = UserStory.objects.select_for_update().filter(pk=story_id, requirement_id=task.requirement_id,
                                                             round=task.round).first()
        if story is None:
            raise DomainError("no such story in this task", "story")
        if story.state != StoryState.DRAFT:
            raise IllegalTransition(f"the story is {story.state}; only draft stories can be edited")
        before = {field: getattr(story, field) for field in EDITABLE}
        after = _validated({**before, **{k: v for k, v in changes.items() if k in EDITABLE}})
        changed = [field for field in EDITABLE if after[field] != before[field]]
        if not changed:
            return None
        for field in changed:
            setattr(story, field, after[field])
        story.save(update_fields=changed)
        _repin(task, story)
        edit = StoryEdit.objects.create(
            story=story, review_task=task, edited_by=actor.user, via=actor.via, origin=origin or {},
            before={f: before[f] for f in changed}, after={f: after[f] for f in changed},
        )
        emit(task.requirement, "StoryEditedByReviewer", {"review_task": str(task.pk), "story": str(story.pk),
                                                          "fields": changed})
    return edit


def _validated(values: dict[str, Any]) -> dict[str, Any]:
    try:
        return StoryOut.model_validate(values).model_dump()
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "non_field_errors"
        raise DomainError(f"{field}: {first['msg']}", field) from None


def _repin(task: ReviewTask, story: UserStory) -> None:
    pinned = list(task.context.get("stories") or [])
    index = story.position - 1
    if 0 <= index < len(pinned):
        pinned[index] = {**pinned[index], **{field: getattr(story, field) for field in EDITABLE}}
        task.context = {**task.context, "stories": pinned}
        task.save(update_fields=["context"])
