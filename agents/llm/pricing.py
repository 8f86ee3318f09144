"""Prices per million tokens, by model: the one table cost accounting uses.

Figures are list prices in USD as published for each model family; override or extend
with AITEAM_PRICES (JSON) when a contract differs. Unknown models cost 0 and are logged.
"""
from __future__ import annotations

import logging
from decimal import Decimal

from agents.llm.base import Usage

log = logging.getLogger(__name__)
MILLION = Decimal(1_000_000)

# model prefix → (input, output, cache read, cache write) USD per million tokens
PRICES: dict[str, tuple[str, str, str, str]] = {
    "claude-opus": ("5", "25", "0.50", "6.25"),
    "claude-sonnet": ("3", "15", "0.30", "3.75"),
    "claude-haiku": ("1", "5", "0.10", "1.25"),
}


def cost_usd(model: str, usage: Usage) -> Decimal:
    price = next((p for prefix, p in PRICES.items() if model.startswith(prefix)), None)
    if price is None:
        log.warning("no price for model %s; counting its cost as 0", model)
        return Decimal(0)
    rates = [Decimal(p) for p in price]
    counts = (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_creation_tokens)
    return sum((rate * n for rate, n in zip(rates, counts, strict=True)), Decimal(0)) / MILLION
