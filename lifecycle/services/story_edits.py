"""A reviewer edits a draft story before approving it.

The story row takes the new text (it is what later steps build on); a StoryEdit row keeps
what it was, who changed it, when and from where; the task's pinned copy of the stories
follows, so the API and the inbox show what is actually being approved. The edit is
validated with the same schema the Business Analyst's output must pass.

Both an edit and a decision on the stories say which text they were made on (optimistic concurrency): a
story's version for an edit, the task's stories_version for a decision, each a hash of the text as shown. One that
changed since is refused (StoriesChanged, 409) and nothing is saved or decided, so no reviewer approves a text
they never read and no edit silently undoes another reviewer's.
"""
from __future__ import annotations

import hashlib
import json
from datetime import UTC
from typing import Any

from django.db import transaction
from pydantic import ValidationError

from agents.schemas import StoryOut
from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, StoriesChanged, echoed
from lifecycle.models import ReviewTask, StoryEdit, UserStory
from lifecycle.services.assignment import ensure_may_review, lock_task_requirement, replay_hold
from lifecycle.services.outbox import emit
from lifecycle.states import Decision, ReviewKind, StoryState

EDITABLE = ("title", "as_a", "i_want", "so_that", "acceptance_criteria", "priority", "story_points")


def story_edit(
    *, task_id: Any, story_id: Any, actor: Actor, changes: dict[str, Any], version: str,
    origin: dict[str, Any] | None = None,
) -> StoryEdit | None:
    """Apply a reviewer's changes to a draft story of a pending stories task; None when nothing changed.
    `version`: the story's story_version when the reviewer opened it; StoriesChanged if it changed since."""
    with transaction.atomic():
        lock_task_requirement(task_id)  # the requirement first, then the task: the order of every writer
        task = ReviewTask.objects.select_for_update(of=("self",)).select_related("organization", "requirement").get(
            pk=task_id)
        ensure_may_review(actor.user, task)
        if task.kind != ReviewKind.STORIES_APPROVAL or not task.is_pending:
            raise IllegalTransition("stories can be edited only while their approval task is pending")
        if held := replay_hold(task):  # a replay's stories are its record of the source run: nobody edits them
            raise IllegalTransition(held)
        story = UserStory.objects.select_for_update().filter(pk=story_id, requirement_id=task.requirement_id,
                                                             round=task.round).first()
        if story is None:
            raise DomainError("no such story in this task", "story")
        if story.state != StoryState.DRAFT:
            raise IllegalTransition(f"the story is {story.state}; only draft stories can be edited")
        if version != story_version(story):
            raise StoriesChanged(f"story {story.position} changed since you opened it{_newest_edit(task, story)}; "
                                 "your text was not saved: compare it with the story as it is now and save again")
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


def stories_version(task: ReviewTask) -> str:
    """The version of a stories approval task's stories as the inbox and the API show them (its pinned copy, which
    every edit updates): a hash of their text. "" for a task of another kind."""
    return _digest(task.context.get("stories") or []) if task.kind == ReviewKind.STORIES_APPROVAL else ""


def story_version(story: UserStory) -> str:
    """The version of one story as its edit form shows it: a hash of its editable text."""
    return _digest({field: getattr(story, field) for field in EDITABLE})


def ensure_stories_unchanged(task: ReviewTask, decision: str, version: str | None, *, required: bool) -> None:
    """For a decision, inside its lock: refuse it when the task's stories changed since they were shown (`version`,
    their stories_version then). `required`: the decider read them where their version is shown (the review page,
    the API), so approving them needs it: nobody approves a text without saying which."""
    if version is None:
        if required and task.kind == ReviewKind.STORIES_APPROVAL and decision == Decision.APPROVE:
            raise DomainError("approving stories needs the stories_version of the stories you read (the task's "
                              "stories_version): read the task again and send it", "stories_version")
        return
    if task.kind != ReviewKind.STORIES_APPROVAL:
        raise DomainError("only a stories approval task has a stories_version", "stories_version")
    if version != stories_version(task):
        raise StoriesChanged(f"the stories changed since they were shown to you{_newest_edit(task)}; nothing was "
                             "decided: read them as they are now and decide again")


def _newest_edit(task: ReviewTask, story: UserStory | None = None) -> str:
    edits = StoryEdit.objects.filter(review_task=task).select_related("story", "edited_by").order_by("-id")
    edit = (edits.filter(story=story) if story is not None else edits).first()
    if edit is None:
        return ""
    who = getattr(edit.edited_by, "username", "") or "a deleted user"
    return (f" (the newest edit: story {edit.story.position} '{echoed(edit.story.title, 80)}' by {who} at "
            f"{edit.created_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC)")


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
