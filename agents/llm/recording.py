"""Wrap any provider so every call, answer or error, reaches a sink (the LLMCall table).

A call the worker's soft time limit cut short is recorded too (its answer, and whether the API billed it, are
unknown): the audit shows the attempt, and a replay of the run meets the same interruption at the same place.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from celery.exceptions import SoftTimeLimitExceeded

from agents.llm.base import LLMError, LLMRequest, LLMResponse, Provider
from agents.llm.redact import redact

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallRecord:
    provider: str
    request: LLMRequest
    response: LLMResponse | None
    error: str
    latency_ms: int


class RecordingProvider:
    def __init__(self, inner: Provider, sink: Callable[[CallRecord], None]) -> None:
        self.inner, self.sink = inner, sink
        self.name = inner.name

    def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.monotonic()
        try:
            response = self.inner.complete(request)
        except LLMError as exc:
            self.sink(CallRecord(self.name, request, None, redact(f"{type(exc).__name__}: {exc}"), _since(started)))
            raise
        except SoftTimeLimitExceeded:
            took = _since(started)
            try:
                self.sink(CallRecord(self.name, request, None, f"{SoftTimeLimitExceeded.__name__}: the worker's time "
                                     f"limit ended the call after {took} ms; its answer and cost are unknown", took))
            except Exception:  # the limit must still end the task: recording it is second
                log.exception("could not record a model call cut short by the time limit")
            raise
        self.sink(CallRecord(self.name, request, response, "", response.latency_ms or _since(started)))
        return response


def _since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
