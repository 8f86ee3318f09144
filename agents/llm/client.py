"""What an agent holds: a provider plus the model chosen for each role."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from agents.llm.base import Provider
from agents.llm.structured import generate
from agents.llm.tool_use import DEFAULT_MAX_TURNS, Tool, ToolUse, converse

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class LLM:
    provider: Provider
    models: dict[str, str]  # role → model name
    default_model: str
    prompts: dict[str, str] | None = None  # the requirement's prompt bundle; None reads the files
    max_tokens: dict[str, int] = field(default_factory=dict)  # role → output limit; "default" for the others

    def prompt(self, name: str) -> str:
        from agents.prompts import load_prompt

        return self.prompts[name] if self.prompts and name in self.prompts else load_prompt(name)

    def model_for(self, role: str) -> str:
        return self.models.get(role, self.default_model)

    def generate(self, *, role: str, system: str, messages: list[dict], schema: type[T],
                 validation_context: Any = None) -> T:
        model, limit = self._model_and_limit(role)
        return generate(self.provider, role=role, model=model, system=system, messages=messages, schema=schema,
                        max_tokens=limit, validation_context=validation_context)

    def converse(self, *, role: str, system: str, messages: list[dict], tools: Sequence[Tool], finish: type[T],
                 max_turns: int = DEFAULT_MAX_TURNS) -> tuple[T, list[ToolUse]]:
        """Several turns of tool use ending in `finish`'s structured output (agents.llm.tool_use)."""
        model, limit = self._model_and_limit(role)
        return converse(self.provider, role=role, model=model, system=system, messages=messages, tools=tools,
                        finish=finish, max_tokens=limit, max_turns=max_turns)

    def _model_and_limit(self, role: str) -> tuple[str, int]:
        """The role's model, checked priced before the call (an unpriced model's spend would never stop a cost
        budget), and its output limit."""
        from agents.llm.pricing import ensure_priced

        model = self.model_for(role)
        ensure_priced(model)
        return model, self.max_tokens.get(role) or self.max_tokens.get("default") or 4096
