"""Replay: answer from a recorded cassette, without the network.

A cassette is JSON: {"interactions": [{"role", "tool"?, "match": [substrings], "tool_input",
"model", "usage", "latency_ms"}]}, the usage counts named as in agents.llm.base.Usage. An
interaction answers a request of its role (and forced tool, when given) when every `match`
string occurs in the request's system prompt or messages; the most specific match wins.
Matching is stateless, so any worker process answers the same request the same way.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import fields
from pathlib import Path
from typing import Any

from agents.llm.base import LLMError, LLMRequest, LLMResponse, Usage

USAGE_KEYS = tuple(f.name for f in fields(Usage))


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
        tool_input, usage = _tool_input_of(found), _usage_of(found)
        if self.latency_ms:
            time.sleep(self.latency_ms / 1000)
        tool_use = {"type": "tool_use", "id": f"toolu_replay_{uuid.uuid4().hex[:12]}",
                    "name": request.tool.name, "input": tool_input}
        return LLMResponse(
            tool_input=tool_input, content=[tool_use], model=found.get("model", request.model),
            usage=usage, stop_reason="tool_use", latency_ms=int((time.monotonic() - started) * 1000),
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


def _tool_input_of(interaction: dict[str, Any]) -> dict[str, Any]:
    tool_input = interaction.get("tool_input")
    if not isinstance(tool_input, dict):
        raise LLMError(f"replay: {_name(interaction)} has no tool_input object to answer with")
    return tool_input


def _usage_of(interaction: dict[str, Any]) -> Usage:
    """The interaction's token counts, under this project's names (not the API's `cache_read_input_tokens`)."""
    usage = interaction.get("usage", {})
    counts_ok = isinstance(usage, dict) and set(usage) <= set(USAGE_KEYS) and all(
        isinstance(n, int) and n >= 0 for n in usage.values())
    if not counts_ok:
        raise LLMError(f"replay: {_name(interaction)} has usage {usage!r}; expected whole token counts "
                       f"under {', '.join(USAGE_KEYS)}")
    return Usage(**usage)


def _name(interaction: dict[str, Any]) -> str:
    """How an error names a cassette interaction: by what a reader finds it by in the file."""
    tool = f", tool {interaction['tool']!r}" if "tool" in interaction else ""
    match = interaction.get("match", [])
    return f"the cassette interaction for role {interaction.get('role')!r}{tool} matching {match!r}"


def _text_of(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text") or b.get("content") or json.dumps(b.get("input", ""))) for b in content)
