"""The Anthropic API's prompt cache, as its documentation describes it, for the fake server to report usage with.

The rules modelled (Anthropic, "Prompt caching"):
- A request is one sequence of blocks in the order tools → system → messages; a `cache_control` on a block is a
  breakpoint, and what is cached is the whole prefix up to and including that block. At most 4 breakpoints.
- A prefix shorter than the model's minimum is not cached (no error: it is billed as plain input).
- At each breakpoint the API looks for a cached prefix ending there or at one of the 20 blocks before it; the
  longest found is read (`cache_read_input_tokens`). The prefix up to the last cacheable breakpoint past it is
  written (`cache_creation_input_tokens`), and the rest of the request is `input_tokens`. The three add up to the
  request's input.
- An entry lives 5 minutes from its last use (a read refreshes it). Caches are per model.
- A different `tool_choice` invalidates the cached messages but not the tools and system before them.

Tokens are estimated, not counted: the UTF-8 bytes of each block's canonical JSON (keys sorted, `cache_control`
left out) divided by 4, at least 1. Deterministic, so tests can assert exact figures; the real tokenizer differs.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

TTL_S = 300.0
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
BYTES_PER_TOKEN = 4
# Minimum cacheable prefix by model-name prefix (the longest matching prefix wins), as documented: Haiku 4.5,
# Opus 4.5 and 4.6 need 4,096 tokens, Haiku 3 and 3.5 2,048, Sonnet and the other Opus models 1,024. Later
# Haiku models are assumed to keep Haiku 4.5's floor.
MIN_CACHEABLE = {"claude-": 1024, "claude-haiku": 4096, "claude-opus-4-5": 4096, "claude-opus-4-6": 4096,
                 "claude-3-haiku": 2048, "claude-3-5-haiku": 2048}


class TooManyBreakpoints(ValueError):
    """The API answers 400 invalid_request_error to more than 4 cache_control blocks."""


def min_cacheable(model: str) -> int:
    prefix = max((p for p in MIN_CACHEABLE if model.startswith(p)), key=len, default="claude-")
    return MIN_CACHEABLE[prefix]


def estimate_tokens(block: Any) -> int:
    data = {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block
    return max(1, len(json.dumps(data, sort_keys=True, ensure_ascii=False).encode()) // BYTES_PER_TOKEN)


@dataclass(frozen=True)
class _Block:
    key: str  # what identifies the prefix ending here
    tokens: int  # the prefix's tokens, this block included
    marked: bool


def _parts(body: dict[str, Any]) -> Iterator[tuple[Any, bool]]:
    """(block, is a breakpoint) in the order the API reads them; tool_choice as an uncounted block before the
    messages, so changing it misses every cached prefix past the system prompt."""
    for tool in body.get("tools") or []:
        yield tool, "cache_control" in tool
    system = body.get("system") or []
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system:
        yield block, "cache_control" in block
    yield {"tool_choice": body.get("tool_choice")}, False
    for message in body.get("messages") or []:
        content = message.get("content")
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            yield {"role": message.get("role"), **block}, "cache_control" in block


def _blocks(body: dict[str, Any]) -> list[_Block]:
    digest, total, blocks = hashlib.sha256(str(body.get("model")).encode()), 0, []
    for block, marked in _parts(body):
        digest.update(json.dumps({k: v for k, v in block.items() if k != "cache_control"}, sort_keys=True).encode())
        total += 0 if "tool_choice" in block else estimate_tokens(block)
        blocks.append(_Block(digest.hexdigest(), total, marked))
    return blocks


class PromptCache:
    """Usage counts for each request, from what earlier requests left in the cache."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[str, float] = {}  # prefix key → when last written or read
        self._lock = threading.Lock()

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        blocks = _blocks(body)
        marks = [i for i, block in enumerate(blocks) if block.marked]
        if len(marks) > MAX_BREAKPOINTS:
            raise TooManyBreakpoints(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                                     f"Found {len(marks)}.")
        minimum = min_cacheable(str(body.get("model")))
        with self._lock:
            now = self._clock()
            hit = self._longest_hit(blocks, marks, now)
            read = blocks[hit].tokens if hit is not None else 0
            cacheable = [i for i in marks if blocks[i].tokens >= minimum]
            written = max(0, blocks[cacheable[-1]].tokens - read) if cacheable else 0
            for i in cacheable + ([hit] if hit is not None else []):
                self._entries[blocks[i].key] = now
        total = blocks[-1].tokens if blocks else 0
        return {"input_tokens": total - read - written, "cache_read_input_tokens": read,
                "cache_creation_input_tokens": written}

    def _longest_hit(self, blocks: list[_Block], marks: list[int], now: float) -> int | None:
        live = {key for key, used in self._entries.items() if now - used < TTL_S}
        hits = (next((i for i in range(mark, max(-1, mark - LOOKBACK_BLOCKS - 1), -1) if blocks[i].key in live), None)
                for mark in marks)
        return max((i for i in hits if i is not None), default=None)
