"""The evaluation policy: in an evaluation project every gate a person would decide is approved on their behalf,
the deployment included, so a case runs to its end without anyone. Each decision is logged and recorded under the
evaluation user's name (the operator who ran `aiteam_eval`, as `aiteam_demo --approve-deployment` records its
operator's), via cli, its reason naming this policy: the deployment guard (ADR 27) lets no policy but the operator's
autonomous one deploy, and an evaluation is not autonomous mode. What needs an answer it cannot give (a
clarification, an escalation, a failed step) ends the case; a spent budget is terminated rather than extended, so
no case spends past its limits (docs/evals.md)."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

from lifecycle.actors import Actor
from lifecycle.models import Requirement, ReviewTask
from lifecycle.services.decisions import review_decide
from lifecycle.states import TERMINAL_STATES, Decision, ReviewKind, StepState

log = logging.getLogger("aiteam.progress")
DECISIONS = {ReviewKind.STORIES_APPROVAL: Decision.APPROVE, ReviewKind.DESIGN_REVIEW: Decision.APPROVE,
             ReviewKind.CODE_REVIEW: Decision.APPROVE, ReviewKind.DEPLOYMENT_APPROVAL: Decision.APPROVE,
             ReviewKind.BUDGET_EXHAUSTED: Decision.REJECT}
REASON = "evaluation policy (docs/evals.md): an evaluation project's gates are decided without a person"


def eval_decide(task: ReviewTask, actor: Actor) -> bool:
    """Decide one pending task as the policy says; False for a kind it leaves (the case ends there)."""
    decision = DECISIONS.get(task.kind)
    if decision is None:
        return False
    log.info("evaluation policy: %s %s", decision, task)
    review_decide(task_id=task.pk, actor=actor, decision=decision, reason=f"{REASON}: {decision}")
    return True


def settle(requirement_id: int, actor: Actor, *, timeout_s: float, poll_s: float = 1.0,
           sleep: Callable[[float], None] = time.sleep) -> Requirement:
    """Decide the requirement's gates until it ends, waits on something the policy leaves, or time runs out. On
    eager Celery each decision runs the steps after it before returning; on workers this polls."""
    deadline, idle = time.monotonic() + timeout_s, 0
    while True:
        requirement = Requirement.objects.get(pk=requirement_id)
        if requirement.state in TERMINAL_STATES or time.monotonic() > deadline:
            return requirement
        pending = list(requirement.review_tasks.pending().order_by("created_at"))
        if pending and eval_decide(pending[0], actor):
            idle = 0
            continue
        running = requirement.steps.filter(state__in=[StepState.QUEUED, StepState.RUNNING]).exists()
        idle = 0 if running else idle + 1
        if pending or idle >= 2:  # twice idle: a step queues the next one on commit, in between none is live
            return requirement
        sleep(poll_s)
