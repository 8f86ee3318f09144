"""Replay: answer from a recorded cassette, without the network.

A cassette is JSON: {"interactions": [{"role", "tool"?, "match": [substrings], "tool_input",
"model", "usage", "latency_ms"}]}. An interaction answers a request of its role (and forced
tool, when given) when every `match` string occurs in the request's system prompt or
messages; the most specific match wins. Matching is stateless, so any worker process
answers the same request the same way.
"""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from agents.llm.base import LLMError, LLMRequest, LLMResponse, Usage


class ReplayProvider:
    name = "replay"

    def __init__(self, interactions: list[dict[str, Any]], *, latency_ms: int = 0) -> None:
        self.interactions = interactions
        self.latency_ms = latency_ms

    @classmethod
    def from_file(cls, path: Path, *, latency_ms: int = 0) -> ReplayProvider:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LLMError(f"cannot read replay cassette {path}: {exc}") from None
        return cls(data["interactions"], latency_ms=latency_ms)

    def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.monotonic()
        found = self._match(request)
        if self.latency_ms:
            time.sleep(self.latency_ms / 1000)
        tool_use = {"type": "tool_use", "id": f"toolu_replay_{uuid.uuid4().hex[:12]}",
                    "name": request.tool.name, "input": found["tool_input"]}
        return LLMResponse(
            tool_input=found["tool_input"], content=[tool_use], model=found.get("model", request.model),
            usage=Usage(**found.get("usage", {})), stop_reason="tool_use",
            latency_ms=int((time.monotonic() - started) * 1000),
        )

    def _match(self, request: LLMRequest) -> dict[str, Any]:
        text = "\n".join([request.system, *(_text_of(m["content"]) for m in request.messages)])
        candidates = [
            i for i in self.interactions
            if i["role"] == request.role and i.get("tool", request.tool.name) == request.tool.name
            and all(m in text for m in i.get("match", []))
        ]
        if not candidates:
            raise LLMError(
                f"replay: no recorded answer for role '{request.role}' matches this request; "
                "add an interaction to the cassette or set ANTHROPIC_API_KEY to call the model"
            )
        return max(candidates, key=lambda i: len(i.get("match", [])))


def _text_of(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text") or b.get("content") or json.dumps(b.get("input", ""))) for b in content)
