"""What an agent holds: a provider plus the model chosen for each role."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from agents.llm.base import Provider
from agents.llm.structured import generate

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
        from agents.llm.pricing import ensure_priced

        model = self.model_for(role)
        ensure_priced(model)  # before the call: an unpriced model's spend would never stop a cost budget
        limit = self.max_tokens.get(role) or self.max_tokens.get("default") or 4096
        return generate(self.provider, role=role, model=model, system=system, messages=messages, schema=schema,
                        max_tokens=limit, validation_context=validation_context)
