"""Structured output: force one tool call, validate it with pydantic, repair a bounded number of times."""
from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agents.llm.base import (
    LLMInvalidOutputError,
    LLMOutputStillInvalid,
    LLMOutputTruncated,
    LLMRequest,
    LLMResponse,
    Provider,
    ToolSpec,
)
from agents.prompts import framed

T = TypeVar("T", bound=BaseModel)
DEFAULT_MAX_REPAIRS = 2


def tool_for(schema: type[BaseModel]) -> ToolSpec:
    """The forced tool whose input schema is the output model's JSON schema."""
    doc = (schema.__doc__ or schema.__name__).strip()
    return ToolSpec(name=f"submit_{_snake(schema.__name__)}", description=doc, input_schema=schema.model_json_schema())


def generate(
    provider: Provider,
    *,
    role: str,
    model: str,
    system: str,
    messages: list[dict],
    schema: type[T],
    max_tokens: int = 4096,
    max_repairs: int = DEFAULT_MAX_REPAIRS,
    validation_context: Any = None,
) -> T:
    """Call the model until its tool input validates against `schema`, at most 1 + max_repairs calls. An answer
    that stopped early (cut off, context full, refused) is not repaired: asking again would stop it the same way.
    `validation_context` (the agent's input) reaches the schema's validators as `info.context`, for checks
    against what was asked.

    Only a refusal by the schema (a ValidationError: pydantic's own checks, or a validator raising ValueError or
    AssertionError) is the model's to repair. Anything else a validator raises (a TypeError, LintUnavailable) is
    our code or our tools failing, not the answer: it propagates as it is, so it is routed as such."""
    tool = tool_for(schema)
    conversation = list(messages)
    errors: list[dict[str, str]] = []
    for _ in range(max_repairs + 1):
        request = LLMRequest(role=role, model=model, system=system, messages=conversation, tool=tool, max_tokens=max_tokens)
        response = provider.complete(request)
        raise_if_stopped_early(response.stop_reason, role=role, max_tokens=max_tokens)
        try:
            return schema.model_validate(response.tool_input if response.tool_input is not None else {},
                                         context=validation_context)
        except ValidationError as exc:
            errors = _errors(exc)
            conversation = conversation + _repair_turn(response, tool, json.dumps(errors))
    raise LLMOutputStillInvalid(f"{role}: output still invalid after {max_repairs} repairs: {json.dumps(errors)}",
                                repairs=max_repairs, errors=tuple(errors))


def raise_if_stopped_early(stop_reason: str, *, role: str, max_tokens: int) -> None:
    """Raise for an answer that ended before it was complete, for a reason a repair turn cannot change."""
    if stop_reason == "max_tokens":
        raise LLMOutputTruncated(f"{role}: the answer was cut off at max_tokens={max_tokens}; raise "
                                 f"AITEAM_MAX_OUTPUT_TOKENS[{role!r}]")
    if stop_reason == "model_context_window_exceeded":
        raise LLMOutputTruncated(f"{role}: the answer was cut off because the context filled the model's window; "
                                 "raising the output limit will not help: shrink the context")
    if stop_reason == "refusal":
        raise LLMInvalidOutputError(f"{role}: the model refused to answer (stop_reason 'refusal'); a repair turn "
                                    "would not change that")


def _repair_turn(response: LLMResponse, tool: ToolSpec, problem: str) -> list[dict]:
    """Echo the model's answer and tell it, as a tool error, what to fix. The problems quote the answer (and, for
    edits, the repository's lines), so they go back framed as data like every other untrusted text (ADR 27)."""
    tool_use = next((b for b in response.content if b.get("type") == "tool_use"), None)
    text = framed(f"Your {tool.name} input was invalid. Call {tool.name} again with corrected input. The problems, "
                  "as a JSON list of where and what:", problem)
    if tool_use is None:
        return [{"role": "assistant", "content": response.content or [{"type": "text", "text": "(no answer)"}]},
                {"role": "user", "content": text}]
    result = {"type": "tool_result", "tool_use_id": tool_use["id"], "is_error": True, "content": text}
    return [{"role": "assistant", "content": response.content}, {"role": "user", "content": [result]}]


def _errors(exc: ValidationError) -> list[dict[str, str]]:
    return [{"loc": ".".join(map(str, e["loc"])), "msg": e["msg"]} for e in exc.errors()[:10]]


def _snake(name: str) -> str:
    """TechnicalSpecOutput → technical_spec_output, QCOutput → qc_output."""
    return re.sub(r"(?<!^)(?=[A-Z][a-z])", "_", name).lower()
