"""The running step's deadline, for its model calls: a call's timeout is capped by the time the step has left.

The step runner sets it (lifecycle.runner); outside a step (tests, the shell) there is none and calls keep their
own timeout. A call that would outlast the deadline times out first, cleanly (a transient error, retried
with the step), instead of being cut by the worker's soft time limit in the middle of a read. The cap is
taken when the call starts, and a capped call gets no SDK retries. A call the deadline does not cap keeps
them: should one of its retries run past the deadline, the soft limit ends it as itself
(agents.llm.anthropic_provider) and it is recorded (agents.llm.replay).
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_deadline: ContextVar[float | None] = ContextVar("llm_deadline", default=None)


@contextmanager
def deadline_in(seconds: float) -> Iterator[None]:
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def seconds_left() -> float | None:
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()
