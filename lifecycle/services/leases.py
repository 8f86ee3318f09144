"""Step leases: claim a step, write under its fence, finish, release or skip it, and reap the lost ones.

Celery with Redis delivers at least once, and a hard-killed worker's message comes back only after the
visibility timeout. The Step row is therefore the record: a claim takes a lease and bumps the fence; a write is
accepted only with the current fence while the step is still running; the reaper re-queues steps whose lease
expired or whose message was lost. A running step's lease is renewed as it works (heartbeat), up to the step's hard
time limit, so the lease is short: a dead worker's or a stuck step is re-run within about a lease and a reaper
interval.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from lifecycle import step_keys
from lifecycle.errors import StaleStep
from lifecycle.models import Requirement, Step
from lifecycle.services import dispatch, failures
from lifecycle.states import TERMINAL_STATES, StepState

log = logging.getLogger("aiteam.progress")
STEP_ONLY = ("self",)  # select_for_update(of=…): the step's row only, its requirement read unlocked
# Both rows, the requirement's first: PostgreSQL locks a row of each table in the order FOR UPDATE OF names them.
# Review decisions lock the requirement, then a step; locking the step first deadlocked against them
# (tests/integration/test_lock_order.py).
REQUIREMENT_FIRST = ("requirement", "self")


@dataclass(frozen=True)
class Lease:
    step_id: int
    fence: int
    requirement_id: object
    key: str
    attempt: int

    @property
    def role(self) -> str:
        return step_keys.ROLE_OF_STEP[step_keys.kind_of(self.key)]

    @property
    def kind(self) -> str:
        return step_keys.kind_of(self.key)

    @property
    def task_key(self) -> str:
        """The plan task an engineer step builds ("T1"), or ""."""
        return self.key.partition(":")[2]


@contextmanager
def heartbeat(lease: Lease) -> Iterator[None]:
    """While the block runs, the process's heartbeat renews the step's lease every STEP_TIMEOUTS.heartbeat
    seconds (the block may wait seconds on a model or the sandbox), until the step's hard time limit: a thread
    pool does not enforce Celery's time limits, so a stuck step's lease then runs out and the reaper takes the
    step back; its late write is refused by the fence. A killed worker's beats stop with it."""
    _BEATS.add(lease)
    try:
        yield
    finally:
        _BEATS.discard(lease)


class _Heartbeat:
    """One thread and one database connection per process renew every running step's lease, however many steps
    its pool runs at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._renew_until: dict[Lease, float] = {}  # a lease, and when (time.monotonic()) to stop renewing it
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._renew_until[lease] = time.monotonic() + settings.STEP_TIMEOUTS.hard_time_limit
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name="lease heartbeat", daemon=True)
                self._thread.start()

    def discard(self, lease: Lease) -> None:
        with self._lock:
            self._renew_until.pop(lease, None)

    def _after_fork(self) -> None:
        """A forked pool child inherits the parent's leases but not its thread."""
        self._lock, self._renew_until, self._thread = threading.Lock(), {}, None

    def _beat(self) -> None:
        while True:
            time.sleep(settings.STEP_TIMEOUTS.heartbeat)
            try:
                self._beat_once()
            except Exception:  # a missed beat, whatever failed: the next one comes well before the leases run out
                log.warning("renewing the running steps' leases failed", exc_info=True)

    def _beat_once(self) -> None:
        leases = self._due()
        if not leases:
            connection.close()  # an idle worker holds no connection for its heartbeat
            return
        close_old_connections()  # a connection broken or past CONN_MAX_AGE is replaced before the beat
        for lease in leases:
            try:
                held = _renew(lease)
            except Exception:  # this lease misses one beat; the others still get theirs
                log.warning("renewing the lease of step %s failed", lease.step_id, exc_info=True)
                continue
            if held is False:
                self.discard(lease)  # finished, or taken over by another worker

    def _due(self) -> list[Lease]:
        """The leases to renew now; those past their step's hard time limit are dropped, once, with a warning."""
        now = time.monotonic()
        with self._lock:
            for lease in [lease for lease, until in self._renew_until.items() if until <= now]:
                del self._renew_until[lease]
                log.warning("step %s ran past its hard time limit: its lease is no longer renewed, the reaper "
                            "takes it back", lease.step_id)
            return list(self._renew_until)


def _renew(lease: Lease) -> bool | None:
    """Extend the lease if it is still held (its fence current, its step running): True. False when it is not (drop
    it); None when the step's row is locked (its own apply holds it, possibly waiting on a repository's lock): this
    beat skips it rather than wait, so one locked row never holds up the process's other leases. One row at a time:
    an UPDATE of every running step at once deadlocked against applies, which lock a step and insert the next ones."""
    held = Step.objects.filter(pk=lease.step_id, fence=lease.fence, state=StepState.RUNNING)
    with transaction.atomic():
        free = list(held.select_for_update(skip_locked=True, no_key=True).values_list("pk", flat=True))
        if free and Step.objects.filter(pk__in=free).update(
                lease_expires_at=timezone.now() + timedelta(seconds=settings.STEP_TIMEOUTS.lease)) == 1:
            return True
    return None if held.exists() else False


_BEATS = _Heartbeat()
os.register_at_fork(after_in_child=_BEATS._after_fork)


def lease_of(step: Step) -> Lease:
    return Lease(step.pk, step.fence, step.requirement_id, step.key, step.attempt)


def claim_fields(worker: str) -> dict:
    """The fields of a step as a claim by `worker` leaves it, but its fence and runs."""
    now = timezone.now()
    return {"state": StepState.RUNNING, "worker": worker, "started_at": now,
            "lease_expires_at": now + timedelta(seconds=settings.STEP_TIMEOUTS.lease)}


def step_claim(*, step_id: int, worker: str) -> Lease | None:
    """Take the lease on a step, or return None when there is nothing to do for this delivery."""
    with transaction.atomic():
        try:
            step = _locked(step_id, of=STEP_ONLY)  # its requirement read, not locked: its writers lock it
        except Step.DoesNotExist:
            log.warning("step %s no longer exists (its requirement was deleted); dropping the message", step_id)
            return None
        verdict = _claim_verdict(step, timezone.now())
        if verdict == _SKIP:
            _close(step, StepState.SKIPPED, f"requirement is {step.requirement.state}")
        elif verdict == _CLAIM:
            for name, value in claim_fields(worker).items():
                setattr(step, name, value)
            step.fence += 1
            step.runs += 1
            step.save(update_fields=["state", "worker", "fence", "runs", "started_at", "lease_expires_at"])
    if verdict == _GIVE_UP:
        _give_up(step_id)  # in a transaction of its own, locking the requirement first
    if verdict != _CLAIM:
        return None
    log.info("step %s of %s started (run %d)", step, step.requirement_id, step.runs)
    return lease_of(step)


_CLAIM, _NOTHING, _SKIP, _GIVE_UP = "claim", "nothing", "skip", "give up"


def _claim_verdict(step: Step, now) -> str:
    """What a delivery of the step (its row and its requirement's as read) comes to."""
    if step.state in (StepState.DONE, StepState.FAILED, StepState.SKIPPED):
        return _NOTHING
    if step.state == StepState.RUNNING and step.lease_expires_at and step.lease_expires_at > now:
        return _NOTHING  # a live worker holds it (a duplicate delivery)
    if step.requirement.state in TERMINAL_STATES:
        return _SKIP
    return _GIVE_UP if step.runs >= settings.AITEAM_STEP_MAX_RUNS else _CLAIM


def _give_up(step_id: int) -> None:
    """A step whose runs are used up (its workers kept dying) fails, is routed, and a step_failed task asks an
    operator; in a transaction of its own that locks the requirement, then the step, since opening the task
    locks the requirement, and the claim held the step only. Checked again under those locks."""
    with transaction.atomic():
        try:
            step = _locked(step_id, of=REQUIREMENT_FIRST)
        except Step.DoesNotExist:
            return
        verdict = _claim_verdict(step, timezone.now())
        if verdict == _SKIP:  # the requirement ended meanwhile
            _close(step, StepState.SKIPPED, f"requirement is {step.requirement.state}")
        if verdict != _GIVE_UP:
            return  # or another delivery or an operator got there first
        _close(step, StepState.FAILED, f"gave up after {step.runs} runs: {step.error}")
        failures.step_given_up(step)


def _locked(step_id: int, *, of: tuple[str, ...]) -> Step:
    return Step.objects.select_for_update(of=of).select_related("requirement").get(pk=step_id)


def lock_fenced(lease: Lease) -> Step:
    """Inside a transaction: lock the step and refuse the write unless this lease is current."""
    return _fenced(Step.objects.select_for_update().get(pk=lease.step_id), lease)


def lock_for_apply(lease: Lease) -> tuple[Step, Requirement]:
    """Inside a transaction: lock the requirement, then the step (REQUIREMENT_FIRST), in one statement, and
    refuse the write unless this lease is current."""
    step = _fenced(_locked(lease.step_id, of=REQUIREMENT_FIRST), lease)
    return step, step.requirement


@contextmanager
def step_applying(lease: Lease) -> Iterator[tuple[Step, Requirement]]:
    """The shape of every apply: one transaction that locks the requirement and the fenced step, lets the caller
    store the output and move the requirement, then marks the step done."""
    with transaction.atomic():
        step, requirement = lock_for_apply(lease)
        yield step, requirement
        step_finish(step)


def _fenced(step: Step, lease: Lease) -> Step:
    if step.state != StepState.RUNNING or step.fence != lease.fence:
        raise StaleStep(f"step {step} has fence {step.fence}/{step.state}; write with fence {lease.fence} refused")
    return step


def step_finish(step: Step) -> None:
    """Mark a locked, fenced step done (called inside the service that applies its output)."""
    _close(step, StepState.DONE, "")
    log.info("step %s of %s done", step, step.requirement_id)


def step_release(lease: Lease, *, error: str, retry_in_s: float = 0) -> None:
    """Give the lease back after a transient failure. `enqueued_at` is set to when the retry is due, so the
    reaper does not treat a step waiting out its backoff as a lost message and send it early."""
    with transaction.atomic():
        step = lock_fenced(lease)
        step.state, step.lease_expires_at, step.error = StepState.QUEUED, None, error[:4000]
        step.enqueued_at = timezone.now() + timedelta(seconds=retry_in_s)
        step.save(update_fields=["state", "lease_expires_at", "error", "enqueued_at"])


def step_fail(lease: Lease, *, error: str) -> None:
    """A permanent failure: the step stops, a human is asked; the requirement keeps its state."""
    with transaction.atomic():
        step, _ = lock_for_apply(lease)  # the requirement first: opening the task locks it
        _close(step, StepState.FAILED, error)
        failures.open_step_failed_task(step)


def step_skip(lease: Lease, *, reason: str) -> None:
    """The requirement moved on (cancelled, or another path) while the step ran: nothing to apply."""
    with transaction.atomic():
        _close(lock_fenced(lease), StepState.SKIPPED, reason)


def step_retry_by_human(step: Step) -> None:
    """A reviewer chose to run a failed step again: fresh run budget, queued after commit."""
    step.state, step.runs, step.error, step.lease_expires_at = StepState.QUEUED, 0, "", None
    step.enqueued_at = timezone.now()
    step.save(update_fields=["state", "runs", "error", "lease_expires_at", "enqueued_at"])
    transaction.on_commit(lambda: dispatch.send_step(step.pk, step.key), robust=True)


def steps_reap(now=None) -> list[int]:
    """Re-queue steps whose lease expired or whose queue message seems lost; returns their ids."""
    now = now or timezone.now()
    stale_queued = now - timedelta(seconds=settings.AITEAM_STEP_STALE_QUEUED_S)
    expired = Step.objects.filter(state=StepState.RUNNING, lease_expires_at__lt=now)
    lost = Step.objects.filter(state=StepState.QUEUED, enqueued_at__lt=stale_queued)
    requeued = []
    for step in list(expired[:500]) + list(lost[:500]):
        # Conditional update: of two reapers, only the one that changes the row re-queues it. A row locked by its
        # step's apply is skipped, not waited for: the apply is ending the step anyway.
        claimed = Step.objects.filter(pk=step.pk, state=step.state, fence=step.fence, enqueued_at=step.enqueued_at)
        with transaction.atomic():
            free = list(claimed.select_for_update(skip_locked=True, no_key=True).values_list("pk", flat=True))
            won = bool(free) and Step.objects.filter(pk__in=free).update(
                state=StepState.QUEUED, lease_expires_at=None, enqueued_at=now) == 1
        if won:
            log.warning("reaper: re-queuing %s of %s (was %s)", step, step.requirement_id, step.state)
            requeued.append(step.pk)
            dispatch.send_step(step.pk, step.key)
    return requeued


def _close(step: Step, state: str, error: str) -> None:
    step.state, step.error, step.finished_at, step.lease_expires_at = state, error[:4000], timezone.now(), None
    step.save(update_fields=["state", "error", "finished_at", "lease_expires_at"])
