"""Wrap any provider so every call, answer or error, reaches a sink (the LLMCall table)."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from agents.llm.base import LLMError, LLMRequest, LLMResponse, Provider
from agents.llm.redact import redact


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
        self.sink(CallRecord(self.name, request, response, "", response.latency_ms or _since(started)))
        return response


def _since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
