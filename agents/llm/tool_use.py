"""Multi-turn tool use through the one provider interface: the model calls tools, reads their results, and ends
by calling the finishing tool, whose input is the structured output (as agents.llm.structured forces it).

Each turn is one `Provider.complete` call offering the finishing tool and the others, one call a turn
(`disable_parallel_tool_use`), so every turn is an ordinary request: recorded, replayable and budget-checked by
whatever wraps the provider. A tool's result goes back as a `tool_result` block, framed as data (it carries
untrusted text: briefs, tickets, code, model answers; ADR 27). A tool that refuses (bad arguments, not permitted,
not found) answers an error result the model can act on; it never ends the conversation. After `max_turns`
tool calls the finishing tool is forced, so a conversation always ends.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agents.llm.base import LLMOutputStillInvalid, LLMRequest, Provider, ToolSpec
from agents.llm.structured import raise_if_stopped_early, tool_for
from agents.prompts import framed

T = TypeVar("T", bound=BaseModel)
DEFAULT_MAX_TURNS = 6
MAX_INVALID_FINISHES = 2
RESULT_MAX_CHARS = 12_000


class ToolRefused(Exception):
    """A tool would not run with these arguments; the message goes back to the model as the tool's error."""


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its spec, and `run(arguments) -> text` (raising ToolRefused to say no)."""

    spec: ToolSpec
    run: Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class ToolUse:
    """One call the model made, as it went: the tool, its arguments, the text it got back, whether it was an
    error."""

    tool: str
    arguments: dict[str, Any]
    result: str
    is_error: bool


def converse(provider: Provider, *, role: str, model: str, system: str, messages: list[dict], tools: Sequence[Tool],
             finish: type[T], max_tokens: int = 4096, max_turns: int = DEFAULT_MAX_TURNS,
             validation_context: Any = None) -> tuple[T, list[ToolUse]]:
    """Run the turns until the model calls the finishing tool with valid input; returns that output and the tool
    calls made on the way, in order."""
    finishing = tool_for(finish)
    by_name = {tool.spec.name: tool for tool in tools}
    conversation, uses, invalid = list(messages), [], 0
    while True:
        offered = tuple(t.spec for t in tools) if len(uses) < max_turns else ()
        request = LLMRequest(role=role, model=model, system=system, messages=conversation, tool=finishing,
                             tools=offered, max_tokens=max_tokens)
        response = provider.complete(request)
        raise_if_stopped_early(response.stop_reason, role=role, max_tokens=max_tokens)
        block = next((b for b in response.content if b.get("type") == "tool_use"), None)
        name = response.tool_name or (block or {}).get("name") or finishing.name
        arguments = response.tool_input if isinstance(response.tool_input, dict) else {}
        if name == finishing.name:
            try:
                return finish.model_validate(arguments, context=validation_context), uses
            except ValidationError as exc:
                invalid += 1
                problems = json.dumps([{"loc": ".".join(map(str, e["loc"])), "msg": e["msg"]} for e in exc.errors()[:10]])
                if invalid > MAX_INVALID_FINISHES:
                    raise LLMOutputStillInvalid(f"{role}: {finishing.name} still invalid: {problems}",
                                                repairs=MAX_INVALID_FINISHES) from None
                result, is_error = f"Invalid {finishing.name} input; call it again corrected: {problems}", True
        else:
            result, is_error = _run(by_name.get(name) if offered else None, name, arguments)
            uses.append(ToolUse(tool=name, arguments=arguments, result=result, is_error=is_error))
        conversation = conversation + _result_turn(response.content, block, result, is_error)


def _run(tool: Tool | None, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    if tool is None:
        return f"there is no tool {name!r} now; answer with what you have", True
    try:
        return tool.run(arguments)[:RESULT_MAX_CHARS], False
    except ToolRefused as refusal:
        return str(refusal)[:RESULT_MAX_CHARS], True


def _result_turn(content: list[dict], block: dict | None, result: str, is_error: bool) -> list[dict]:
    text = framed("The tool's result:", result)
    if block is None:
        return [{"role": "assistant", "content": content or [{"type": "text", "text": "(no answer)"}]},
                {"role": "user", "content": text}]
    answer = {"type": "tool_result", "tool_use_id": block["id"], "content": text, **({"is_error": True} if is_error else {})}
    return [{"role": "assistant", "content": content}, {"role": "user", "content": [answer]}]
