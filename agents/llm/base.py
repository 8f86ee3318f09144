"""The provider protocol: one method, typed requests and responses, one error family.

Messages use the Anthropic Messages shape (role + content blocks) as the canonical form;
every provider speaks it, so a recorded call replays through any of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolSpec:
    """The one tool the model is forced to call; its input is the structured output."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class LLMRequest:
    role: str
    model: str
    system: str
    messages: list[dict[str, Any]]
    tool: ToolSpec
    max_tokens: int = 4096
    # Tools the model may call instead of `tool` (agents.llm.tool_use): with any, the model picks one of `tool`
    # and these for each call; without, `tool` is forced.
    tools: tuple[ToolSpec, ...] = ()

    @property
    def tool_names(self) -> tuple[str, ...]:
        return (self.tool.name, *(t.name for t in self.tools))


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0


@dataclass(frozen=True)
class LLMResponse:
    tool_input: dict[str, Any] | None  # the input of the tool called
    content: list[dict[str, Any]]
    model: str
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = ""
    latency_ms: int = 0
    tool_name: str = ""  # which tool was called: the request's `tool` unless it offered others


class LLMError(Exception):
    """Any failure of a model call. `transient` says whether a later retry may succeed."""

    transient = False


class LLMTransientError(LLMError):
    """Timeouts, 429, 529, connection errors: retry with backoff."""

    transient = True


class LLMInvalidOutputError(LLMError):
    """The model's answer did not validate, even after the bounded repair loop."""


class LLMOutputStillInvalid(LLMInvalidOutputError):
    """Every answer of the bounded repair loop was refused by the output schema. `repairs`: how many repair
    requests were sent; `errors`: the last answer's validation errors ({"loc", "msg"})."""

    def __init__(self, message: str, *, repairs: int = 0, errors: tuple[dict[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.repairs, self.errors = repairs, tuple(errors)


class LLMOutputTruncated(LLMInvalidOutputError):
    """The answer was cut off (at max_tokens, or by a full context window): asking again would cut it off again."""


class LLMConfigError(LLMError):
    """The provider is misconfigured; the message says how to fix it."""


class Provider(Protocol):
    name: str

    def complete(self, request: LLMRequest) -> LLMResponse: ...
