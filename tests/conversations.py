"""Helpers for assistant tests (ADR 36): script one answer's model calls, in the order the worker makes them."""
from __future__ import annotations

from agents.llm.scripted import ScriptedProvider


def script_answer(provider: ScriptedProvider, *, specialists: dict[str, list[tuple[str, dict]]], answer: str,
                  reason: str = "the question is about this") -> None:
    """Queue a whole answer: the supervisor's route, each specialist's tool calls (name, arguments) then its
    findings, and the supervisor's answer."""
    provider.enqueue({"specialists": list(specialists), "reason": reason})
    for name, calls in specialists.items():
        for tool, arguments in calls:
            provider.enqueue(arguments, tool=tool)
        provider.enqueue({"findings": f"{name} found what the tools said"})
    provider.enqueue({"answer": answer})
