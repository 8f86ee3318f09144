"""A token estimate that errs high, for hard budgets that must hold without a tokenizer.

No tokenizer can be fetched here (no network) and the `anthropic` SDK counts tokens only through the API, so the
estimate is one token per 3 UTF-8 bytes, rounded up. Claude's tokenizer averages about 3.5–4 characters a token on
English and a little less on code, so bytes / 3 over-counts typical source by roughly a sixth: a map sized to a
budget by this estimate stays within the budget when the model counts it. Non-ASCII text is counted by its bytes,
which over-counts it more, never less.
"""
from __future__ import annotations

import math

BYTES_PER_TOKEN = 3


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8", errors="surrogateescape")) / BYTES_PER_TOKEN)


def check_budget(budget_tokens: int) -> int:
    """A budget is a whole number of tokens, zero or more; anything else is the caller's error, said plainly."""
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 0:
        raise ValueError(f"a token budget is a whole number >= 0, not {budget_tokens!r}")
    return budget_tokens
