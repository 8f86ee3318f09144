"""Replay of a recorded run: answer each step's model calls from the calls an earlier run made.

Unlike the cassette (`replay.py`, matched by the request's text), a recorded run is matched
by position: the n-th call a step makes gets the n-th call the source run's same step
(key and attempt) made, provided role and tool agree. That is what a post-mortem needs: the
same answers in the same order, including the source's repair rounds and model errors,
whatever the prompts look like now. The caller (lifecycle) loads the recording into plain
`RecordedCall`s; this module never touches the ORM.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from agents.llm.base import (
    LLMConfigError,
    LLMError,
    LLMInvalidOutputError,
    LLMOutputTruncated,
    LLMRequest,
    LLMResponse,
    LLMTransientError,
    Usage,
)
from agents.llm.replay import CassetteMissError

# A recorded error replays as the same class (transient ones and the time limit are retried, the others fail the
# step).
ERRORS: dict[str, type[Exception]] = {cls.__name__: cls for cls in
                                      (LLMTransientError, LLMInvalidOutputError, LLMOutputTruncated, LLMConfigError,
                                       CassetteMissError, LLMError, SoftTimeLimitExceeded)}


class ReplayMissError(LLMError):
    """The replay asked for a call the recording does not have (or a different one): a permanent step failure."""


@dataclass(frozen=True)
class RecordedCall:
    role: str
    tool: str
    model: str
    content: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = ""
    usage: Usage = field(default_factory=Usage)
    error: str = ""  # "LLMTransientError: overloaded" when the recorded call failed

    @property
    def tool_input(self) -> dict[str, Any] | None:
        block = next((b for b in self.content if b.get("type") == "tool_use" and b.get("name") == self.tool), None)
        return block.get("input") if block else None


class RecordedRunProvider:
    """Answers one step's calls in order, starting after the calls this step already replayed (`start`),
    so a step that runs again (a retry, another worker) picks up where the recording does."""

    name = "replay"

    def __init__(self, calls: list[RecordedCall], *, step: str, start: int = 0) -> None:
        self.calls, self.step, self.position = calls, step, start

    def complete(self, request: LLMRequest) -> LLMResponse:
        number = self.position + 1
        call = self._expect(request, number)
        self.position = number
        if call.error:
            name, _, message = call.error.partition(": ")
            raise ERRORS.get(name, LLMError)(f"replayed from the recording: {message or name}")
        # The recorded blocks as they were (tool_use ids included), so repair turns echo them identically.
        return LLMResponse(tool_input=call.tool_input, content=call.content, model=call.model, usage=call.usage,
                           stop_reason=call.stop_reason)

    def _expect(self, request: LLMRequest, number: int) -> RecordedCall:
        if number > len(self.calls):
            raise ReplayMissError(
                f"replay: step {self.step} asks for model call #{number} ({request.role}, {request.tool.name}) but the "
                f"source run recorded {len(self.calls)} call(s) for that step"
            )
        call = self.calls[number - 1]
        if (call.role, call.tool) != (request.role, request.tool.name):
            raise ReplayMissError(
                f"replay: step {self.step} call #{number} asks {request.role}/{request.tool.name}, but the source "
                f"run recorded {call.role}/{call.tool} there"
            )
        return call
