"""Prices per million tokens, by model: the one table cost accounting uses.

Figures are list prices in USD as published for each model family. The longest matching prefix wins, so a
family's older, dearer generations are listed apart (Opus 4 and 4.1 cost three times Opus 4.5). A contract
that differs, or a model not listed, goes in AITEAM_PRICES (JSON: prefix → [input, output, cache read, cache
write]), which extends and overrides the table. A model without a price is refused before it is called
(LLM.generate) and at startup for the configured models (a system check): its spend would count as 0 and no
cost budget would ever stop it.
"""
from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.conf import settings

from agents.llm.base import LLMConfigError, Usage

MILLION = Decimal(1_000_000)
Price = tuple[Decimal, Decimal, Decimal, Decimal]  # input, output, cache read, cache write

PRICES: dict[str, tuple[str, str, str, str]] = {
    "claude-opus": ("5", "25", "0.50", "6.25"),  # Opus 4.5 and later
    "claude-opus-4-0": ("15", "75", "1.50", "18.75"),  # Opus 4's alias
    "claude-opus-4-1": ("15", "75", "1.50", "18.75"),
    "claude-opus-4-2025": ("15", "75", "1.50", "18.75"),  # Opus 4 (claude-opus-4-20250514)
    "claude-3-opus": ("15", "75", "1.50", "18.75"),
    "claude-sonnet": ("3", "15", "0.30", "3.75"),
    "claude-3-7-sonnet": ("3", "15", "0.30", "3.75"),
    "claude-3-5-sonnet": ("3", "15", "0.30", "3.75"),
    "claude-haiku": ("1", "5", "0.10", "1.25"),  # Haiku 4.5 and later
    "claude-3-5-haiku": ("0.80", "4", "0.08", "1"),
    "claude-3-haiku": ("0.25", "1.25", "0.03", "0.30"),
}


def price_of(model: str) -> Price | None:
    table = {**PRICES, **getattr(settings, "AITEAM_PRICES", {})}
    prefix = max((p for p in table if model.startswith(p)), key=len, default=None)
    return None if prefix is None else tuple(Decimal(str(rate)) for rate in table[prefix])


def ensure_priced(model: str) -> None:
    if price_of(model) is None:
        raise LLMConfigError(f"no price for model {model!r}: its spend could not be counted; add it to AITEAM_PRICES")


def cost_usd(model: str, usage: Usage) -> Decimal:
    price = price_of(model)
    if price is None:  # called before the call (ensure_priced); a row recorded for it all the same is not lost
        return Decimal(0)
    counts = (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_creation_tokens)
    return sum((rate * n for rate, n in zip(price, counts, strict=True)), Decimal(0)) / MILLION


def price_problems(raw: object) -> list[str]:
    """What is wrong with an AITEAM_PRICES value."""
    if not isinstance(raw, dict):
        return ["AITEAM_PRICES must be a JSON object: model prefix → [input, output, cache read, cache write]"]
    problems = []
    for prefix, rates in raw.items():
        try:
            ok = isinstance(rates, list) and len(rates) == 4 and all(Decimal(str(r)) >= 0 for r in rates)
        except InvalidOperation:
            ok = False
        if not ok:
            problems.append(f"AITEAM_PRICES[{prefix!r}]: expected four non-negative USD prices per million tokens")
    return problems
