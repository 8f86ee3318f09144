"""A scripted provider for tests: answers (or errors) are queued with enqueue() and served in order."""
from __future__ import annotations

import time
from collections import deque
from typing import Any

from agents.llm.base import LLMError, LLMRequest, LLMResponse, Usage


class ScriptedProvider:
    name = "scripted"

    def __init__(self) -> None:
        self.queue: deque[dict[str, Any] | Exception] = deque()
        self.requests: list[LLMRequest] = []

    def enqueue(self, answer: dict[str, Any] | Exception, *, delay_s: float = 0.0,
                tool: str | None = None) -> ScriptedProvider:
        """Queue an answer: the input of the request's forced tool, or of `tool` (one the request offers)."""
        self.queue.append(answer if isinstance(answer, Exception) else {"input": answer, "delay": delay_s, "tool": tool})
        return self

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        if not self.queue:
            raise LLMError(f"scripted provider: no answer queued for {request.role}")
        item = self.queue.popleft()
        if isinstance(item, Exception):
            raise item
        time.sleep(item["delay"])
        name = item["tool"] or request.tool.name
        if name not in request.tool_names:
            raise LLMError(f"scripted provider: {request.role}'s request offers no tool {name!r}")
        block = {"type": "tool_use", "id": f"toolu_{len(self.requests)}", "name": name, "input": item["input"]}
        return LLMResponse(tool_input=item["input"], content=[block], model=request.model,
                           usage=Usage(input_tokens=100, output_tokens=50), stop_reason="tool_use", tool_name=name)
