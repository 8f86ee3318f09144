"""Celery tasks that run one agent step each: load by id, run the agent, hand the output to a service.

This module is the one place in agents/ that reaches the database, through lifecycle's
selectors and services only. The model call happens outside any transaction.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from agents.llm.base import LLMError, LLMTransientError
from agents.llm.factory import llm_from_settings, provider_from_settings
from agents.llm.recording import RecordingProvider
from agents.llm.redact import redact
from agents.roles import BUSINESS_ANALYST, PRODUCT_OWNER
from agents.roles.base import Agent
from lifecycle import selectors
from lifecycle.errors import IllegalTransition, StaleStep
from lifecycle.services import product, steps
from lifecycle.services.llm_calls import llm_call_record

log = logging.getLogger("aiteam.progress")


@dataclass(frozen=True)
class StepSpec:
    agent: Agent
    context: Callable[[steps.Lease], Any]
    apply: Callable[..., None]


STEPS: dict[str, StepSpec] = {
    steps.PO_CLARIFY: StepSpec(PRODUCT_OWNER, lambda lease: selectors.product_owner_context(lease.requirement_id),
                               product.product_owner_apply),
    steps.BA_STORIES: StepSpec(BUSINESS_ANALYST,
                               lambda lease: selectors.business_analyst_context(lease.requirement_id, lease.attempt),
                               product.business_analyst_apply),
}


def backoff_seconds(retries: int) -> int:
    return min(2 ** retries * 5, 300)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True,
             max_retries=settings.AITEAM_STEP_MAX_RUNS)
def run_step(self, step_id: int) -> None:
    lease = steps.step_claim(step_id=step_id, worker=f"{self.request.hostname or 'eager'} pid {os.getpid()}")
    if lease is None:
        return
    spec = STEPS[lease.key]
    try:
        output = spec.agent.run(spec.context(lease), _llm(lease))
    except (LLMTransientError, SoftTimeLimitExceeded) as exc:
        steps.step_release(lease, error=redact(f"{type(exc).__name__}: {exc}"))
        _retry_later(self, step_id, lease)
        return
    except LLMError as exc:
        steps.step_fail(lease, error=redact(f"{type(exc).__name__}: {exc}"))
        return
    _apply(spec, lease, output)


def _retry_later(task, step_id: int, lease: steps.Lease) -> None:
    if task.request.retries >= task.max_retries:
        log.warning("step %s: retries used up; the reaper re-queues it until its run limit", lease.step_id)
        return
    if task.request.is_eager:  # no broker to come back through: run the retry now
        task.apply((step_id,), retries=task.request.retries + 1)
        return
    raise task.retry(countdown=backoff_seconds(task.request.retries))


def _apply(spec: StepSpec, lease: steps.Lease, output: Any) -> None:
    try:
        spec.apply(lease=lease, output=output)
    except StaleStep as exc:
        log.warning("late write refused: %s", exc)
    except IllegalTransition as exc:
        log.warning("step %s no longer applies: %s", lease.step_id, exc)
        steps.step_skip(lease, reason=str(exc))


def _llm(lease: steps.Lease):
    def sink(record) -> None:
        llm_call_record(record, requirement_id=lease.requirement_id, step_id=lease.step_id)

    return llm_from_settings(RecordingProvider(provider_from_settings(), sink))
