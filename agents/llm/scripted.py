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

    def enqueue(self, answer: dict[str, Any] | Exception, *, delay_s: float = 0.0) -> ScriptedProvider:
        self.queue.append(answer if isinstance(answer, Exception) else {"input": answer, "delay": delay_s})
        return self

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        if not self.queue:
            raise LLMError(f"scripted provider: no answer queued for {request.role}")
        item = self.queue.popleft()
        if isinstance(item, Exception):
            raise item
        time.sleep(item["delay"])
        block = {"type": "tool_use", "id": f"toolu_{len(self.requests)}", "name": request.tool.name, "input": item["input"]}
        return LLMResponse(tool_input=item["input"], content=[block], model=request.model,
                           usage=Usage(input_tokens=100, output_tokens=50), stop_reason="tool_use")
