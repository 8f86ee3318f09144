"""What the review assistant reads and drafts (ADR 36): a waiting review task explained, the change and the test
results behind it, and a feedback skeleton built from those facts (no model call: the specialist fills it in, the
person edits it, nothing is sent). Each function takes a task the caller found within the asker's organization.
"""
from __future__ import annotations

import json
import re
from typing import Any

from django.utils import timezone

from lifecycle.models import ReviewTask
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.assistant_failures import clip, test_reports
from lifecycle.states import ArtifactKind, ReviewKind

CONTEXT_VALUE_CHARS = 700
FILES_SHOWN = 25
DIFF_COUNTS = re.compile(r"\(\+(\d+) -(\d+)\)$")
# The pinned context's keys that review_change_summary reads; the rest is what explain_review_task shows.
CHANGE_KEYS = ("diff_summary", "tests", "quality_score", "gate", "scope", "branch", "ci_config", "notes", "spec_issues")


def explain_review_task(task: ReviewTask) -> str:
    """What the task asks and why, its options, its SLA and who holds it, and what was pinned to it."""
    now = timezone.now()
    late = "OVERDUE since" if task.sla_deadline < now else "due"
    lines = [f"review task {task.pk}: {task.kind} round {task.round} on '{task.requirement}' "
             f"(requirement {task.requirement_id}, {task.requirement.state}); task state {task.state}",
             f"question: {clip(task.question, 600)}",
             f"reasoning: {clip(task.reasoning, 600) or '(none given)'}",
             f"options: {', '.join(task.options)}",
             f"SLA: {late} {task.sla_deadline:%Y-%m-%d %H:%M} UTC; at the SLA: {task.escalation_policy}"
             f"{_limit(task)}; "
             f"assignee {task.assignee or 'none'}"]
    if not task.is_pending:
        who = task.decided_by or task.decided_by_policy or "?"
        lines.append(f"already {task.state}: {task.decision or 'no decision'} by {who}")
    lines += [f"pinned {key}: {_value(value)}" for key, value in task.context.items() if key not in CHANGE_KEYS]
    if any(key in task.context for key in CHANGE_KEYS):
        lines.append("(the change and its tests: review_change_summary)")
    return "\n".join(lines)


def _limit(task: ReviewTask) -> str:
    if task.decide_by is None:
        return ""
    if not task.policy_decides:
        return f"; escalated at {task.decide_by:%Y-%m-%d %H:%M} UTC, never decided by policy: it waits for a person"
    return f"; decided by default at {task.decide_by:%Y-%m-%d %H:%M} UTC"


def review_change_summary(task: ReviewTask) -> str:
    """The change behind the task (its files with +/- lines, the branch, the scope measure) and its test results:
    from the task's pinned context where it has them, else the requirement's newest diff summary and reports."""
    context, requirement = task.context, task.requirement
    diff = context.get("diff_summary") or _newest_diff(task)
    branch = f" (branch {context['branch']})" if context.get("branch") else ""
    lines = [f"the change behind {task.kind} round {task.round} on '{requirement}'{branch}:"]
    if diff:
        counts = [DIFF_COUNTS.search(str(line)) for line in diff]
        added, removed = (sum(int(m.group(i)) for m in counts if m) for i in (1, 2))
        lines.append(f"{len(diff)} files changed, +{added} -{removed} lines")
        lines += [f"  {clip(line, 200)}" for line in diff[:FILES_SHOWN]]
        if len(diff) > FILES_SHOWN:
            lines.append(f"  ... {len(diff) - FILES_SHOWN} more")
    else:
        lines.append("no diff recorded yet")
    for key in ("scope", "quality_score", "tests", "gate", "notes", "spec_issues"):
        if context.get(key):
            lines.append(f"{key.replace('_', ' ')}: {_value(context[key])}")
    if context.get("ci_config"):
        lines.append(f"CI workflow: {len(str(context['ci_config']).splitlines())} lines")
    review = latest(requirement, ArtifactKind.REVIEW, "code_review")
    if review is not None:
        lines.append(f"tech lead's code review v{review.version}: {clip(review.summary, 400)}")
    lines += ["test results:", test_reports(requirement, shown=2)]
    return "\n".join(lines)


def feedback_draft(task: ReviewTask, decision: str = "") -> str:
    """A skeleton for the person's decision, filled with the task's facts; the <...> parts are theirs to write."""
    known = decision in task.options
    lines = [f"Draft for review task {task.pk} ({task.kind} on '{task.requirement}'). A skeleton to edit; nothing is "
             "sent or decided.", f"Decision: {decision if known else ' | '.join(task.options)}"
             f"{f' ({decision} is not an option of this task)' if decision and not known else ''}",
             "Reason: <one sentence: why this decision>"]
    lines += ["What it rests on:", *[f"- {fact}" for fact in _facts(task)]]
    if not known or decision in ("request_changes", "answer"):
        lines += ["Feedback for the team (what to change, one point a line):",
                  *[f"- {point}" for point in _points(task) or ["<what to change and where>"]]]
    if task.kind == ReviewKind.BUDGET_EXHAUSTED:
        suggested = json.dumps(task.context.get("suggested_override") or {}, sort_keys=True)
        lines += [f"Override (for override_budget): {suggested}", "Constraint (for inject_constraint): <a rule the "
                  "team keeps from now on, e.g. a smaller scope>"]
    return "\n".join(lines)


def _facts(task: ReviewTask) -> list[str]:
    context, facts = task.context, []
    if context.get("tests"):
        facts.append(f"tests: {_value(context['tests'])}")
    if context.get("quality_score") is not None:
        facts.append(f"quality score {context['quality_score']}")
    if context.get("diff_summary"):
        facts.append(f"{len(context['diff_summary'])} files changed")
    if context.get("failing_tests"):
        facts.append(f"failing: {', '.join(map(str, context['failing_tests'][:5]))}")
    if context.get("error"):
        facts.append(f"error: {clip(context['error'], 200)}")
    if task.reasoning:
        facts.append(f"the team's reasoning: {clip(task.reasoning, 300)}")
    return facts or [f"the question: {clip(task.question, 300)}"]


def _points(task: ReviewTask) -> list[str]:
    """One line to fill per thing the task put in front of the person: a question, a story, a note, a failing test."""
    context = task.context
    points = [f"{clip(q, 200)} → <your answer>" for q in context.get("questions") or []]
    points += [f"story '{clip(s.get('title', ''), 80)}': <keep, or what to change>" for s in context.get("stories") or []
               if isinstance(s, dict)]
    points += [f"on the note '{clip(n, 160)}': <agree, or what instead>" for n in context.get("notes") or []]
    points += [f"make {t} pass: <what it should do>" for t in (context.get("failing_tests") or [])[:5]]
    return points


def _newest_diff(task: ReviewTask) -> list[str]:
    artifact = latest(task.requirement, ArtifactKind.DIFF_SUMMARY)
    if artifact is None:
        return []
    try:
        lines = content_json(artifact)
    except ValueError:
        lines = artifact.blob.content.splitlines()
    return [str(line) for line in lines] if isinstance(lines, list) else []


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True, ensure_ascii=False)
    return clip(text, CONTEXT_VALUE_CHARS)
