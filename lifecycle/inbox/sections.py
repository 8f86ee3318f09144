"""What the review page shows, read from the task's pinned context and its requirement's latest artifacts.

Everything here is data for templates, which escape it: model output is never trusted as HTML.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from lifecycle.inbox.forms import StoryForm
from lifecycle.models import Artifact, Notification, ReviewTask, StateTransition, StoryEdit
from lifecycle.services.budgets import cell_text
from lifecycle.services.story_edits import story_version
from lifecycle.states import ArtifactKind, ReviewKind, StoryState

DIFF_LINE = re.compile(r"^(?P<status>[A-Z])\S*\s+(?P<path>.+?)\s+\(\+(?P<added>[\d-]+) -(?P<removed>[\d-]+)\)$")
SHOWN_ELSEWHERE = {"stories", "spec_summary", "budget", "suggested_override", "scope", "diff_summary"}
# The budget gate's options as a reviewer reads them (the values stay the API's decisions).
BUDGET_OPTION_LABELS = {"override_budget": "Override the budget", "inject_constraint": "Inject a constraint",
                        "approve": "Approve the partial output", "reject": "Terminate"}


@dataclass
class ChangedFile:
    status: str
    path: str
    added: str = ""
    removed: str = ""


@dataclass
class SuiteResults:
    summary: str
    ok: bool | None
    passed: Any = None
    failed: Any = None
    errors: Any = None
    coverage: Any = None
    failing: list[str] = field(default_factory=list)
    output_tail: str = ""


@dataclass
class ContextItem:
    label: str
    text: str = ""
    items: list[str] = field(default_factory=list)


def stories(task: ReviewTask, *, editable: bool, editing: str = "", posted: StoryForm | None = None
            ) -> list[dict[str, Any]]:
    """The stories under review: the rows when they exist (draft ones editable, the one being edited
    as a form: `posted`, what the reviewer sent, when an edit was refused), else the pinned copies."""
    if task.kind == ReviewKind.STORIES_APPROVAL:
        rows = list(task.requirement.stories.filter(round=task.round).prefetch_related("edits__edited_by"))
        if rows:
            return [_story_entry(s, editable and s.state == StoryState.DRAFT, str(s.pk) == editing, posted)
                    for s in rows]
    return [{"story": s, "edits": [], "editable": False, "form": None} for s in task.context.get("stories") or []]


def _story_entry(story: Any, editable: bool, editing: bool, posted: StoryForm | None) -> dict[str, Any]:
    form = None
    if editable and editing:
        form = posted.placed_at(story) if posted is not None else StoryForm.for_story(story)
    read = posted.version_read() if posted is not None else None
    return {"story": story, "edits": list(story.edits.all()), "editable": editable, "form": form,
            "version": (read if read is not None else story_version(story)) if form is not None else ""}


def spec_summary(task: ReviewTask, artifacts: dict[str, Artifact]) -> str:
    spec = artifacts.get(ArtifactKind.TECHNICAL_SPEC)
    return str(task.context.get("spec_summary") or (spec.summary if spec else ""))


def changed_files(task: ReviewTask, artifacts: dict[str, Artifact]) -> list[ChangedFile]:
    """The whole change the task decides on when its context carries it (a deployment: the engineer's files, QC's
    acceptance tests, the CI workflow), else the engineer's last attempt (the newest diff summary)."""
    lines = task.context.get("diff_summary")
    if not isinstance(lines, list):
        diff = artifacts.get(ArtifactKind.DIFF_SUMMARY)
        if diff is None:
            return []
        lines = _json(diff.blob.content, default=diff.blob.content.splitlines())
    files = []
    for line in lines if isinstance(lines, list) else []:
        match = DIFF_LINE.match(str(line))
        files.append(ChangedFile(**match.groupdict()) if match else ChangedFile(status="", path=str(line)))
    return files


def suite_results(artifacts: dict[str, Artifact]) -> SuiteResults | None:
    report = artifacts.get(ArtifactKind.TEST_REPORT)
    if report is None:
        return None
    content = _json(report.blob.content, default={})
    content = content if isinstance(content, dict) else {}
    meta = {**content, **report.metadata}
    return SuiteResults(
        summary=report.summary, ok=meta.get("ok"), passed=meta.get("passed"), failed=meta.get("failed"),
        errors=meta.get("errors"), coverage=meta.get("coverage_percent", meta.get("coverage")),
        failing=[str(t) for t in (content.get("failing_tests") or [])][:50],
        output_tail=str(content.get("output_tail") or "")[-4000:],
    )


def latest_artifacts(task: ReviewTask) -> dict[str, Artifact]:
    """The newest spec, diff summary and test report of the requirement (one query); for a decided task, the newest
    when it was decided: its page, read later, shows what its reviewer saw, not a later round's."""
    wanted = [ArtifactKind.TECHNICAL_SPEC, ArtifactKind.DIFF_SUMMARY, ArtifactKind.TEST_REPORT]
    artifacts = task.requirement.artifacts.filter(kind__in=wanted)
    if task.decided_at is not None:
        artifacts = artifacts.filter(created_at__lte=task.decided_at)
    newest: dict[str, Artifact] = {}
    for artifact in artifacts.select_related("blob").order_by("created_at"):
        newest[artifact.kind] = artifact
    return newest


def other_context(task: ReviewTask) -> list[ContextItem]:
    """The rest of the pinned context, readable: lists as lists, mappings as `key: value` lines."""
    shown = []
    for key, value in task.context.items():
        if key in SHOWN_ELSEWHERE:
            continue
        label = key.replace("_", " ").capitalize()
        if isinstance(value, list):
            shown.append(ContextItem(label, items=[_line(v) for v in value]))
        elif isinstance(value, dict):
            shown.append(ContextItem(label, items=[f"{k}: {_line(v)}" for k, v in value.items()]))
        else:
            shown.append(ContextItem(label, text=str(value)))
    return shown


def decision_options(task: ReviewTask) -> list[tuple[str, str]]:
    labels = BUDGET_OPTION_LABELS if task.kind == ReviewKind.BUDGET_EXHAUSTED else {}
    return [(option, labels.get(option, option)) for option in task.options]


def budget_standing(task: ReviewTask) -> dict[str, Any] | None:
    """A budget task's pinned spend: one row per scope, "spent / limit (remaining left)" per dimension."""
    table = task.context.get("budget") if task.kind == ReviewKind.BUDGET_EXHAUSTED else None
    if not isinstance(table, dict):
        return None
    dimensions = list(next(iter(table.values()), {}))
    rows = [{"scope": scope, "cells": [cell_text(cells.get(d, {})) for d in dimensions]} for scope, cells in table.items()]
    suggestion = json.dumps(task.context.get("suggested_override") or {}, indent=1)
    return {"dimensions": dimensions, "rows": rows, "suggestion": suggestion}


def history(task: ReviewTask) -> dict[str, list[Any]]:
    return {
        "transitions": list(StateTransition.objects.filter(subject="review_task", subject_id=str(task.pk))
                            .select_related("actor_user").order_by("id")),
        "edits": list(StoryEdit.objects.filter(review_task=task).select_related("story", "edited_by")),
        "notifications": list(Notification.objects.filter(review_task=task).order_by("-id")[:20]),
    }


def _line(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


def _json(text: str, *, default: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default
