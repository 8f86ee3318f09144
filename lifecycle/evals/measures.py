"""What a case's run measured, read from its rows: the outcome, attempts and loops per role, the gates' verdicts,
tokens and cost (LLMCall), and the critical path (docs/evals.md)."""
from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from django.db.models import Count, Sum

from lifecycle import step_keys
from lifecycle.models import EvalOutcome, Requirement, Step
from lifecycle.services.artifacts import content_json
from lifecycle.states import ArtifactKind, RequirementState

OUTCOMES = {RequirementState.DEPLOYED: EvalOutcome.DEPLOYED, RequirementState.ESCALATED: EvalOutcome.ESCALATED,
            RequirementState.CANCELLED: EvalOutcome.CANCELLED}


def outcome_of(requirement: Requirement) -> str:
    return OUTCOMES.get(requirement.state, EvalOutcome.FAILED)


def attempts_per_role(requirement: Requirement) -> dict[str, dict[str, int]]:
    """Per role: the steps it ran (one row per attempt) and their runs (a run again after a lost worker counts)."""
    roles: dict[str, dict[str, int]] = defaultdict(lambda: {"steps": 0, "runs": 0})
    for key, runs in requirement.steps.values_list("key", "runs"):
        role = roles[step_keys.ROLE_OF_STEP.get(step_keys.kind_of(key), key)]
        role["steps"] += 1
        role["runs"] += runs
    return dict(roles)


def loops(requirement: Requirement) -> dict[str, int]:
    """Each loop a role went round: story, design and code review rounds, the engineer's fixes, QC's rounds."""
    kinds = dict(requirement.steps.values_list("key").annotate(n=Count("pk")).order_by())
    return {"story_rounds": requirement.story_round, "design_rounds": requirement.design_round,
            "code_review_rounds": requirement.code_review_round, "dev_attempts": requirement.dev_attempts,
            "engineer_fixes": sum(n for key, n in kinds.items() if step_keys.kind_of(key) == step_keys.FIX),
            "qc_rounds": requirement.artifacts.filter(kind=ArtifactKind.TEST_REPORT, name="qc").count()}


def gate_verdicts(requirement: Requirement) -> list[dict[str, Any]]:
    """The reviews' verdicts, QC's quality gate and every decided review task, in the order they came."""
    gates: list[tuple[Any, dict[str, Any]]] = []
    for artifact in requirement.artifacts.filter(kind=ArtifactKind.REVIEW).order_by("created_at", "version"):
        gates.append((artifact.created_at, {"gate": artifact.name, "verdict": content_json(artifact).get("verdict", "")}))
    for artifact in requirement.artifacts.filter(kind=ArtifactKind.TEST_REPORT, name="qc").order_by("created_at",
                                                                                                      "version"):
        gates.append((artifact.created_at, {"gate": "quality", "verdict": "pass" if artifact.metadata.get("ok") else "fail"}))
    for task in requirement.review_tasks.exclude(decision="").select_related("decided_by").order_by("decided_at"):
        by = task.decided_by_policy or getattr(task.decided_by, "username", "")
        gates.append((task.decided_at, {"gate": task.kind, "verdict": task.decision, "by": by}))
    # stable: each kind keeps its own order; a time never recorded sorts last
    return [gate for _, gate in sorted(gates, key=lambda pair: (pair[0] is None, pair[0]))]


def quality_gate_passed(requirement: Requirement) -> bool | None:
    last = requirement.artifacts.filter(kind=ArtifactKind.TEST_REPORT, name="qc").order_by("-version").first()
    return None if last is None else bool(last.metadata.get("ok"))


def spend(requirement: Requirement) -> dict[str, Any]:
    totals = requirement.llm_calls.aggregate(llm_calls=Count("pk"), input_tokens=Sum("input_tokens"),
                                             output_tokens=Sum("output_tokens"),
                                             cache_read_tokens=Sum("cache_read_tokens"),
                                             cache_creation_tokens=Sum("cache_creation_tokens"), cost_usd=Sum("cost_usd"))
    return {key: value or (Decimal(0) if key == "cost_usd" else 0) for key, value in totals.items()}


def critical_path_s(requirement: Requirement) -> float:
    """The steps outside the plan run one after another, so each counts; the engineer's steps of the plan's tasks
    count along the longest chain of depends_on (a task's attempts and fixes summed). Steps never finished add 0."""
    durations: dict[str, float] = defaultdict(float)
    for step in requirement.steps.exclude(started_at=None).exclude(finished_at=None):
        durations[step.key] += _seconds(step)
    per_task = {key.split(":", 1)[1]: seconds for key, seconds in durations.items()
                if step_keys.kind_of(key) == step_keys.ENGINEER and ":" in key}
    outside = sum(seconds for key, seconds in durations.items() if step_keys.kind_of(key) != step_keys.ENGINEER)
    graph = dict(requirement.plan_tasks.values_list("key", "depends_on"))
    return outside + max((_chain(task, graph, per_task, {}) for task in graph), default=sum(per_task.values()))


def _chain(task: str, graph: dict[str, list[str]], seconds: dict[str, float], memo: dict[str, float]) -> float:
    if task not in memo:
        memo[task] = 0.0  # a cycle (refused by the plan's schema) cannot recurse forever
        memo[task] = seconds.get(task, 0.0) + max(
            (_chain(dep, graph, seconds, memo) for dep in graph.get(task, []) if dep in graph), default=0.0)
    return memo[task]


def _seconds(step: Step) -> float:
    return (step.finished_at - step.started_at).total_seconds()
