"""The step runner: the Celery task that runs one step, and the table of what each step kind runs.

The one place that glues an agent to the database: load the step's context (lifecycle.contexts), run the agent
or the sandbox outside any transaction, hand the output to the step's service. Services send this task by name
(lifecycle.services.dispatch); sandbox steps are queued on `sandbox`, agent steps on `llm`, delivery on `default`.
"""
from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from agents.llm.base import LLMError
from agents.llm.deadline import deadline_in
from agents.llm.factory import llm_from_settings, provider_from_settings
from agents.llm.redact import redact
from agents.llm.replay import RecordingProvider
from agents.roles import (
    BUSINESS_ANALYST,
    CLARIFY_JOBS,
    CODE_REVIEWER,
    DESIGN_REVIEWER,
    DEVOPS_ENGINEER,
    ENGINEER_JOBS,
    FIX_JOBS,
    LOCALIZER,
    PLAN_JOBS,
    QC_ENGINEER,
    TECH_ARCHITECT,
    TRIAGER,
)
from agents.roles.base import Agent, AgentByContext
from agents.sandbox import empty_trash
from agents.schemas.constraints import with_constraints
from lifecycle import contexts, repository_runs, step_keys
from lifecycle.errors import IllegalTransition, StaleStep
from lifecycle.failure_rules import Route
from lifecycle.models import PromptBundle, Requirement
from lifecycle.replay import recordings
from lifecycle.services import (
    budget_gate,
    delivery,
    design,
    development,
    dispatch,
    inline,
    leases,
    localization,
    preparation,
    product,
    quality,
    routing,
)
from lifecycle.services.development import workspace_aligned
from lifecycle.services.llm_calls import context_sources, llm_call_record

log = logging.getLogger("aiteam.progress")


@dataclass(frozen=True)
class StepSpec:
    """How a step runs: an agent on a context (LLM steps) or a plain function (sandbox steps)."""

    apply: Callable[..., None]
    context: Callable[[leases.Lease], Any] | None = None
    agent: Agent | AgentByContext | None = None
    run: Callable[[leases.Lease], Any] | None = None

    def execute(self, lease: leases.Lease, constraints: tuple[str, ...] = ()) -> Any:
        if self.run is not None:
            return self.run(lease)
        context = with_constraints(self.context(lease), constraints)
        return self.agent.run(context, _llm(lease, sources=context_sources(context)))


def _limits():
    from agents.sandbox import SandboxLimits

    # the per-process CPU time follows the wall clock when that is longer: a repository's suite runs in one pytest
    # process, which the default 60 s would kill however far AITEAM_SANDBOX_TIMEOUT_S is raised
    return SandboxLimits(timeout_s=settings.AITEAM_SANDBOX_TIMEOUT_S,
                         cpu_s=max(SandboxLimits.cpu_s, math.ceil(settings.AITEAM_SANDBOX_TIMEOUT_S)),
                         memory_bytes=settings.AITEAM_SANDBOX_MEMORY_MB * 1024 * 1024)


def _sandbox(path):
    from agents.sandbox import run_tests

    return run_tests(path, limits=_limits())


def _repo_prepare(lease: leases.Lease) -> dict:
    """Branch from the base commit, build the environment (network: pip) and run the tests twice there (the
    sandbox: no network). A repository that cannot be prepared as it stands is an output that says why."""
    requirement = Requirement.objects.select_related("project").get(pk=lease.requirement_id)
    if requirement.replay_of_id:
        return recordings.recorded_output(source_id=requirement.replay_of_id, lease=lease)
    return repository_runs.prepare(requirement, limits=_limits())


def _self_test(lease: leases.Lease) -> dict:
    requirement = Requirement.objects.get(pk=lease.requirement_id)
    if requirement.replay_of_id:  # a replay: the source's recorded report, the sandbox is not run
        return recordings.recorded_output(source_id=requirement.replay_of_id, lease=lease)
    workspace = workspace_aligned(requirement.pk)
    if requirement.base_sha:  # an existing repository: its own tests, compared with the baseline
        return repository_runs.judged(requirement, workspace, limits=_limits())
    return _sandbox(workspace.path).to_dict()


def _qc_run(lease: leases.Lease) -> dict:
    """Every test (the engineer's and QC's) in the sandbox, ruff and the runner check (ADR 25) over the code:
    the gate's inputs. On an existing repository: its tests and QC's compared with the baseline (QC's at the base
    commit too, for a bug), and the runner check over the changed files only."""
    from agents.lint import ruff_findings, runner_reach_findings

    requirement = Requirement.objects.get(pk=lease.requirement_id)
    if requirement.replay_of_id:
        return recordings.recorded_output(source_id=requirement.replay_of_id, lease=lease)
    workspace = workspace_aligned(requirement.pk)
    if requirement.base_sha:
        report = repository_runs.judged(requirement, workspace, limits=_limits(), qc_files=preparation.qc_test_files(
            requirement), reproduce=requirement.playbook == "bug_fix")
        return {"report": report, "lint": repository_runs.changed_files_reach(workspace)}
    path = workspace.path
    return {"report": _sandbox(path).to_dict(), "lint": ruff_findings(path) + runner_reach_findings(path)}


def _deliver(lease: leases.Lease) -> dict:
    from agents.delivery import deliver

    source_id = Requirement.objects.values_list("replay_of_id", flat=True).get(pk=lease.requirement_id)
    if source_id:  # a replay pushes nothing: it applies the source's recorded delivery result
        return recordings.recorded_output(source_id=source_id, lease=lease)
    workspace_aligned(lease.requirement_id)  # push what the database records, not what a failed apply left
    return deliver(delivery.delivery_plan(lease.requirement_id)).to_dict()


STEPS: dict[str, StepSpec] = {
    step_keys.PO_TRIAGE: StepSpec(product.triage_apply, lambda lease: contexts.triage_context(lease.requirement_id),
                                  TRIAGER),
    step_keys.REPO_PREPARE: StepSpec(preparation.repo_prepare_apply, run=_repo_prepare),
    step_keys.PO_CLARIFY: StepSpec(product.product_owner_apply, lambda lease: contexts.product_owner_context(
        lease.requirement_id), CLARIFY_JOBS),
    step_keys.BA_STORIES: StepSpec(product.business_analyst_apply, lambda lease: contexts.business_analyst_context(
        lease.requirement_id, lease.attempt), BUSINESS_ANALYST),
    step_keys.ARCHITECT: StepSpec(design.architect_apply, lambda lease: contexts.architect_context(
        lease.requirement_id, lease.attempt), TECH_ARCHITECT),
    step_keys.DESIGN_REVIEW: StepSpec(design.design_review_apply, lambda lease: contexts.design_review_context(
        lease.requirement_id, lease.attempt), DESIGN_REVIEWER),
    step_keys.LOCALIZE: StepSpec(localization.localize_apply, lambda lease: contexts.localize_context(
        lease.requirement_id), LOCALIZER),
    step_keys.PLAN: StepSpec(design.plan_apply, lambda lease: contexts.plan_context(lease.requirement_id), PLAN_JOBS),
    step_keys.ENGINEER: StepSpec(development.engineer_apply, lambda lease: contexts.engineer_context(
        lease.requirement_id, lease.task_key, lease.attempt), ENGINEER_JOBS),
    step_keys.FIX: StepSpec(development.fix_apply, lambda lease: contexts.fix_context(
        lease.requirement_id, lease.attempt), FIX_JOBS),
    step_keys.SELF_TEST: StepSpec(development.self_test_apply, run=_self_test),
    step_keys.CODE_REVIEW: StepSpec(development.code_review_apply, lambda lease: contexts.code_review_context(
        lease.requirement_id, lease.attempt), CODE_REVIEWER),
    step_keys.QC_TESTS: StepSpec(quality.qc_tests_apply, lambda lease: contexts.qc_context(lease.requirement_id),
                             QC_ENGINEER),
    step_keys.QC_RUN: StepSpec(quality.qc_run_apply, run=_qc_run),
    step_keys.DEVOPS: StepSpec(quality.devops_apply, lambda lease: contexts.devops_context(lease.requirement_id),
                           DEVOPS_ENGINEER),
    step_keys.DELIVER: StepSpec(delivery.deliver_apply, run=_deliver),
}


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True,
             max_retries=settings.AITEAM_STEP_MAX_RUNS)
def run_step(self, step_id: int) -> None:
    """Run the step, then, while the chain is young, the next step it scheduled on this queue (inline)."""
    worker = f"{self.request.hostname or 'eager'} pid {os.getpid()}"
    inline_until = time.monotonic() + settings.STEP_TIMEOUTS.inline_window
    lease = leases.step_claim(step_id=step_id, worker=worker)
    while lease is not None:
        continues = not self.request.is_eager and time.monotonic() < inline_until
        lease = _run_one(self, lease, worker=worker, continues=continues, delivered=lease.step_id == step_id)
    # this process's sandbox runs' files, removed once their step has handed on rather than before (another
    # process's are its own to remove: on the llm worker's threads this is a scan of an empty folder)
    empty_trash(this_process_only=True)


def _run_one(task, lease: leases.Lease, *, worker: str, continues: bool, delivered: bool) -> leases.Lease | None:
    """One step under its lease, renewed while it runs (not eagerly: no reaper there, and SQLite writes one at
    a time); returns the lease of the next step when it was claimed for running inline."""
    with nullcontext() if task.request.is_eager else leases.heartbeat(lease):
        return _run_leased(task, lease, worker=worker, continues=continues, delivered=delivered)


def _run_leased(task, lease: leases.Lease, *, worker: str, continues: bool, delivered: bool) -> leases.Lease | None:
    allowance = budget_gate.budget_admit_or_park(lease)  # a spent budget parks the step and asks a human
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
    if not continues:
        _apply(spec, lease, output)
        return None
    with inline.inline_slot(queue=step_keys.queue_for(lease.key), worker=worker) as slot:
        _apply(spec, lease, output)
    return slot.lease


def _retry_later(task, lease: leases.Lease, *, retries: int, delivered: bool) -> None:
    if retries >= task.max_retries:
        log.warning("step %s: retries used up; the reaper re-queues it until its run limit", lease.step_id)
        return
    if task.request.is_eager:  # no broker to come back through: run the retry now
        task.apply((lease.step_id,), retries=retries + 1)
        return
    if not delivered:  # an inline step: its own message, so the chain's message is acked as done
        dispatch.send_step(lease.step_id, lease.key, countdown=routing.backoff_seconds(retries))
        return
    raise task.retry(countdown=routing.backoff_seconds(retries))


def _apply(spec: StepSpec, lease: leases.Lease, output: Any) -> None:
    """Hand the output to the step's service; a refusal or a failure of the apply is recorded, never raised."""
    try:
        spec.apply(lease=lease, output=output)
    except StaleStep as exc:
        log.warning("late write refused: %s", exc)
    except IllegalTransition as exc:
        log.warning("step %s no longer applies: %s", lease.step_id, exc)
        try:
            leases.step_skip(lease, reason=str(exc))
        except StaleStep:
            log.warning("step %s was taken over before it could be skipped", lease.step_id)
    except Exception as exc:  # git failed, the sandbox timed out, a database conflict…: the classifier decides
        log.exception("applying step %s failed", lease.step_id)
        try:
            routing.step_failure_route(lease=lease, exc=exc, resend=True,
                                       error=redact(f"while applying the output: {type(exc).__name__}: {exc}"))
        except StaleStep:
            log.warning("step %s was taken over while failing", lease.step_id)


def _llm(lease: leases.Lease, sources: list[dict] | None = None):
    def sink(record) -> None:
        llm_call_record(record, requirement_id=lease.requirement_id, step_id=lease.step_id, sources=sources)

    try:
        bundle_sha, source_id = Requirement.objects.values_list("prompt_bundle_id", "replay_of_id").get(
            pk=lease.requirement_id)
    except Requirement.DoesNotExist:  # deleted meanwhile: the configured provider and prompts, as before
        bundle_sha, source_id = None, None
    # A replay never reaches the configured provider: its answers come from the source run's recorded calls.
    provider = recordings.replay_provider(source_id=source_id, lease=lease) if source_id else provider_from_settings()
    return llm_from_settings(RecordingProvider(provider, sink), prompts=bundle_prompts(bundle_sha) if bundle_sha else None)


@lru_cache(maxsize=32)
def bundle_prompts(sha256: str) -> dict[str, str]:
    """A bundle's prompts, read once per process: a bundle is named by its content hash, so it never changes."""
    return PromptBundle.objects.values_list("prompts", flat=True).get(pk=sha256)
