"""Inline continuation: a worker runs the next step of a chain itself, without a broker hop, when nothing else
waits on that step's queue (it would only wait for this worker anyway).

The step row is inserted already claimed (running, fence 1, a fresh lease) in the scheduling transaction; the
slot hands its lease over only once that transaction commits. A worker that dies before running it leaves a
running step whose lease expires: the reaper re-queues it, as for any other step.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache

from django.db import transaction
from kombu.exceptions import ChannelError

from aiteam.celery import app
from lifecycle.models import Step
from lifecycle.services.leases import Lease, claim_fields, lease_of
from lifecycle.step_keys import queue_for

log = logging.getLogger("aiteam.progress")
IDLE_FOR_S = 0.02  # how long an "idle" answer is trusted: a chain of fast steps asks the broker at most this often


class InlineSlot:
    """Room for one step a worker runs next, in the same task, instead of sending it through the broker."""

    def __init__(self, *, queue: str, worker: str) -> None:
        self.queue, self.worker = queue, worker
        self.reserved = False
        self.lease: Lease | None = None

    def claim_fields(self) -> dict:
        return {**claim_fields(self.worker), "fence": 1, "runs": 1}

    def reserve(self, step: Step) -> None:
        """Hold the slot for this step, inserted claimed by this transaction; its lease is handed over once the
        transaction commits."""
        self.reserved = True
        transaction.on_commit(lambda: self._hand_over(step))

    def _hand_over(self, step: Step) -> None:
        self.lease = lease_of(step)
        log.info("step %s of %s started inline in %s", step, step.requirement_id, self.worker)

    def clear(self) -> None:
        """Empty again, for an apply run a second time (the first one's transaction rolled back)."""
        self.reserved, self.lease = False, None


_slot: ContextVar[InlineSlot | None] = ContextVar("inline_slot", default=None)


@contextmanager
def inline_slot(*, queue: str, worker: str) -> Iterator[InlineSlot]:
    slot = InlineSlot(queue=queue, worker=worker)
    token = _slot.set(slot)
    try:
        yield slot
    finally:
        _slot.reset(token)


def inline_candidate(key: str) -> InlineSlot | None:
    """The slot a step of this key may take, if any: this worker's, empty, for the step's queue, which is idle."""
    slot = _slot.get()
    if slot is None or slot.reserved or queue_for(key) != slot.queue:
        return None
    return slot if queue_idle(slot.queue) else None


def queue_idle(queue: str) -> bool:
    """Nothing waits on the broker queue: running the next step here takes no work from another worker. An idle
    answer is trusted for IDLE_FOR_S, so a message that arrives meanwhile waits at most that much longer."""
    if _idle_until.get(queue, 0.0) > time.monotonic():
        return True
    with _sizing:  # one broker channel per process: the llm worker's threads take turns on it
        try:
            idle = _queue_sizer().waiting(queue) == 0
        except ChannelError:  # the broker has no such queue: nothing waits on it
            return True
        except Exception:  # a broker hiccup: send through the broker as usual, and reconnect next time
            log.debug("could not size queue %s", queue, exc_info=True)
            if _queue_sizer.cache_info().currsize:
                _queue_sizer().close()
                _queue_sizer.cache_clear()
            return False
    if idle:
        _idle_until[queue] = time.monotonic() + IDLE_FOR_S
    return idle


class QueueSizer:
    """How many messages wait on a queue (kombu's passive declare), through one broker connection per process."""

    def __init__(self) -> None:
        self.connection = app.connection_for_read()
        self.channel = self.connection.default_channel

    def waiting(self, queue: str) -> int:
        return self.channel.queue_declare(queue=queue, passive=True).message_count

    def close(self) -> None:
        try:
            self.connection.release()
        except Exception:  # already broken: nothing left to release
            log.debug("closing the queue sizer's broker connection failed", exc_info=True)


_idle_until: dict[str, float] = {}  # queue → until when its last idle answer holds (per process)
_sizing = threading.Lock()


@lru_cache(maxsize=1)
def _queue_sizer() -> QueueSizer:
    return QueueSizer()
