"""Celery tasks that run one agent step each: load by id, run the agent, hand the output to a service.

This module is the one place in agents/ that reaches the database, through lifecycle's
selectors, contexts and services. The model call and the sandbox run happen outside any
transaction; sandbox steps are queued on the `sandbox` queue, agent steps on `llm`.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from agents.llm.base import LLMError
from agents.llm.deadline import deadline_in
from agents.llm.factory import llm_from_settings, provider_from_settings
from agents.llm.recording import RecordingProvider
from agents.llm.redact import redact
from agents.roles import (
    BUSINESS_ANALYST,
    CLARIFY_JOBS,
    CODE_REVIEWER,
    DESIGN_REVIEWER,
    DEVOPS_ENGINEER,
    ENGINEER,
    FIXER,
    PLAN_JOBS,
    QC_ENGINEER,
    TECH_ARCHITECT,
)
from agents.roles.base import Agent, AgentByContext
from agents.schemas.constraints import with_constraints
from aiteam.db import by_pk
from aiteam.db.write_behind import RowsChanged
from lifecycle import contexts, recordings, selectors
from lifecycle.errors import IllegalTransition, StaleStep
from lifecycle.failure_rules import Route
from lifecycle.models import PromptBundle, Requirement
from lifecycle.services import budgets, delivery, design, development, product, quality, routing, steps
from lifecycle.services.development import workspace_aligned
from lifecycle.services.llm_calls import llm_call_record

log = logging.getLogger("aiteam.progress")


@dataclass(frozen=True)
class StepSpec:
    """How a step runs: an agent on a context (LLM steps) or a plain function (sandbox steps)."""

    apply: Callable[..., None]
    context: Callable[[steps.Lease], Any] | None = None
    agent: Agent | AgentByContext | None = None
    run: Callable[[steps.Lease], Any] | None = None
    # the apply locks with steps.lock_at_commit (its every effect is in the database, so applying it again after
    # a rollback is harmless): the step is applied on the rows read with the COMMIT that claimed it
    at_commit: bool = False

    def execute(self, lease: steps.Lease, constraints: tuple[str, ...] = ()) -> Any:
        if self.run is not None:
            return self.run(lease)
        return self.agent.run(with_constraints(self.context(lease), constraints), _llm(lease))


def _sandbox(path):
    from agents.sandbox import SandboxLimits, run_tests

    limits = SandboxLimits(timeout_s=settings.AITEAM_SANDBOX_TIMEOUT_S,
                           memory_bytes=settings.AITEAM_SANDBOX_MEMORY_MB * 1024 * 1024)
    return run_tests(path, limits=limits)


def _self_test(lease: steps.Lease) -> dict:
    requirement = by_pk.get(Requirement, lease.requirement_id)
    if requirement.replay_of_id:  # a replay: the source's recorded report, the sandbox is not run
        return recordings.recorded_output(source_id=requirement.replay_of_id, lease=lease)
    return _sandbox(workspace_aligned(requirement.pk).path).to_dict()


def _qc_run(lease: steps.Lease) -> dict:
    """Every test (the engineer's and QC's) in the sandbox, and ruff over the code: the gate's inputs."""
    from agents.lint import ruff_findings

    requirement = by_pk.get(Requirement, lease.requirement_id)
    if requirement.replay_of_id:
        return recordings.recorded_output(source_id=requirement.replay_of_id, lease=lease)
    path = workspace_aligned(requirement.pk).path
    return {"report": _sandbox(path).to_dict(), "lint": ruff_findings(path)}


def _deliver(lease: steps.Lease) -> dict:
    from agents.delivery import deliver

    source_id = by_pk.values(Requirement, lease.requirement_id, ("replay_of_id",))[0]
    if source_id:  # a replay pushes nothing: it applies the source's recorded delivery result
        return recordings.recorded_output(source_id=source_id, lease=lease)
    workspace_aligned(lease.requirement_id)  # push what the database records, not what a failed apply left
    return deliver(delivery.delivery_plan(lease.requirement_id)).to_dict()


STEPS: dict[str, StepSpec] = {
    steps.PO_CLARIFY: StepSpec(product.product_owner_apply, lambda lease: selectors.product_owner_context(
        lease.requirement_id), CLARIFY_JOBS, at_commit=True),
    steps.BA_STORIES: StepSpec(product.business_analyst_apply, lambda lease: selectors.business_analyst_context(
        lease.requirement_id, lease.attempt), BUSINESS_ANALYST, at_commit=True),
    steps.ARCHITECT: StepSpec(design.architect_apply, lambda lease: contexts.architect_context(
        lease.requirement_id, lease.attempt), TECH_ARCHITECT, at_commit=True),
    steps.DESIGN_REVIEW: StepSpec(design.design_review_apply, lambda lease: contexts.design_review_context(
        lease.requirement_id, lease.attempt), DESIGN_REVIEWER, at_commit=True),
    steps.PLAN: StepSpec(design.plan_apply, lambda lease: contexts.plan_context(lease.requirement_id), PLAN_JOBS, at_commit=True),
    steps.ENGINEER: StepSpec(development.engineer_apply, lambda lease: contexts.engineer_context(
        lease.requirement_id, lease.task_key, lease.attempt), ENGINEER),
    steps.FIX: StepSpec(development.fix_apply, lambda lease: contexts.fix_context(
        lease.requirement_id, lease.attempt), FIXER),
    steps.SELF_TEST: StepSpec(development.self_test_apply, run=_self_test),
    steps.CODE_REVIEW: StepSpec(development.code_review_apply, lambda lease: contexts.code_review_context(
        lease.requirement_id, lease.attempt), CODE_REVIEWER, at_commit=True),
    steps.QC_TESTS: StepSpec(quality.qc_tests_apply, lambda lease: contexts.qc_context(lease.requirement_id),
                             QC_ENGINEER),
    steps.QC_RUN: StepSpec(quality.qc_run_apply, run=_qc_run),
    steps.DEVOPS: StepSpec(quality.devops_apply, lambda lease: contexts.devops_context(lease.requirement_id),
                           DEVOPS_ENGINEER),
    steps.DELIVER: StepSpec(delivery.deliver_apply, run=_deliver),
}


def backoff_seconds(retries: int) -> int:
    return min(2 ** retries * 5, 300)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True,
             max_retries=settings.AITEAM_STEP_MAX_RUNS)
def run_step(self, step_id: int) -> None:
    """Run the step, then, while the chain is young, the next step it scheduled on this queue (inline)."""
    worker = f"{self.request.hostname or 'eager'} pid {os.getpid()}"
    inline_until = time.monotonic() + settings.STEP_TIMEOUTS.inline_window
    lease = steps.step_claim(step_id=step_id, worker=worker, rows_for=_applies_at_commit)
    while lease is not None:
        inline = not self.request.is_eager and time.monotonic() < inline_until
        lease = _run_one(self, lease, worker=worker, inline=inline, delivered=lease.step_id == step_id)


def _run_one(task, lease: steps.Lease, *, worker: str, inline: bool, delivered: bool) -> steps.Lease | None:
    """One step under its lease; returns the lease of the next step when it was claimed for running inline."""
    allowance = budgets.budget_allows(lease)  # no query when read with the claiming COMMIT; a spent budget parks it
    if not allowance:
        return None
    spec = STEPS[lease.kind]
    try:
        with deadline_in(settings.STEP_TIMEOUTS.soft_time_limit):  # a model call times out before the soft limit
            output = spec.execute(lease, allowance.constraints)
    except Exception as exc:  # the failure classifier decides: retry with backoff (infrastructure), else a human
        if not isinstance(exc, (LLMError, SoftTimeLimitExceeded)):
            log.exception("step %s crashed", lease.step_id)
        error = redact(f"{type(exc).__name__}: {exc}")
        try:
            route = routing.step_failure_route(lease=lease, exc=exc, error=error, resend=False)
        except StaleStep:  # taken over meanwhile (an expired lease): the new holder runs the step
            log.warning("step %s failed after it was taken over; nothing recorded", lease.step_id)
            return None
        if route == Route.RETRY:
            _retry_later(task, lease, retries=task.request.retries if delivered else 0, delivered=delivered)
        return None
    if not inline:
        _apply(spec, lease, output)
        return None
    with steps.inline_slot(queue=steps.queue_for(lease.key), worker=worker, rows_for=_applies_at_commit) as slot:
        _apply(spec, lease, output, slot)
    return slot.lease


def _applies_at_commit(key: str) -> bool:
    spec = STEPS.get(steps.kind_of(key))
    return spec is not None and spec.at_commit


def _retry_later(task, lease: steps.Lease, *, retries: int, delivered: bool) -> None:
    if retries >= task.max_retries:
        log.warning("step %s: retries used up; the reaper re-queues it until its run limit", lease.step_id)
        return
    if task.request.is_eager:  # no broker to come back through: run the retry now
        task.apply((lease.step_id,), retries=retries + 1)
        return
    if not delivered:  # an inline step: its own message, so the chain's message is acked as done
        run_step.apply_async((lease.step_id,), queue=steps.queue_for(lease.key), countdown=backoff_seconds(retries))
        return
    raise task.retry(countdown=backoff_seconds(retries))


def _apply(spec: StepSpec, lease: steps.Lease, output: Any, slot: steps.InlineSlot | None = None) -> None:
    """Hand the output to the step's service. A step whose apply works at commit (spec.at_commit)
    is applied first on the rows read with the COMMIT that claimed it (steps.lock_at_commit); if they changed
    since, or the apply refused on them (an illegal transition, a stale fence: a refusal decided on the snapshot
    is decided again on the rows as they are), that transaction has rolled back and it is applied again, locking."""
    try:
        if lease.rows is not None and lease.rows.row is not None and spec.at_commit:  # its rows came with it
            try:
                spec.apply(lease=lease, output=output)
                return
            except (RowsChanged, IllegalTransition, StaleStep) as exc:
                log.info("step %s: its apply on the snapshot rolled back (%s: %s); applying it again, locking",
                         lease.step_id, type(exc).__name__, exc)
                if slot is not None:
                    slot.clear()  # nothing the rolled-back try scheduled exists
        spec.apply(lease=lease.locking(), output=output)
    except StaleStep as exc:
        log.warning("late write refused: %s", exc)
    except IllegalTransition as exc:
        log.warning("step %s no longer applies: %s", lease.step_id, exc)
        try:
            steps.step_skip(lease, reason=str(exc))
        except StaleStep:
            log.warning("step %s was taken over before it could be skipped", lease.step_id)
    except Exception as exc:  # git failed, the sandbox timed out, a database conflict…: the classifier decides
        log.exception("applying step %s failed", lease.step_id)
        try:
            routing.step_failure_route(lease=lease, exc=exc, resend=True,
                                       error=redact(f"while applying the output: {type(exc).__name__}: {exc}"))
        except StaleStep:
            log.warning("step %s was taken over while failing", lease.step_id)


def _llm(lease: steps.Lease):
    def sink(record) -> None:
        llm_call_record(record, requirement_id=lease.requirement_id, step_id=lease.step_id)

    try:
        bundle_sha, source_id = steps.requirement_values(lease, ("prompt_bundle_id", "replay_of_id"))
    except Requirement.DoesNotExist:  # deleted meanwhile: the configured provider and prompts, as before
        bundle_sha, source_id = None, None
    # A replay never reaches the configured provider: its answers come from the source run's recorded calls.
    provider = recordings.replay_provider(source_id=source_id, lease=lease) if source_id else provider_from_settings()
    return llm_from_settings(RecordingProvider(provider, sink), prompts=bundle_prompts(bundle_sha) if bundle_sha else None)


@lru_cache(maxsize=32)
def bundle_prompts(sha256: str) -> dict[str, str]:
    """A bundle's prompts, read once per process: a bundle is named by its content hash, so it never changes."""
    return PromptBundle.objects.values_list("prompts", flat=True).get(pk=sha256)
