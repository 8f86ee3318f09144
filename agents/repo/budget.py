"""A token estimate that errs high, for hard budgets that must hold without a tokenizer.

No tokenizer can be fetched here (no network) and the `anthropic` SDK counts tokens only through the API, so the
estimate is one token per 3 UTF-8 bytes, rounded up. Claude's tokenizer averages about 3.5–4 characters a token on
English and a little less on code, so bytes / 3 over-counts typical source by roughly a sixth: a map sized to a
budget by this estimate stays within the budget when the model counts it. Non-ASCII text is counted by its bytes,
which over-counts it more, never less.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping

BYTES_PER_TOKEN = 3


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8", errors="surrogateescape")) / BYTES_PER_TOKEN)


def check_budget(budget_tokens: int) -> int:
    """A budget is a whole number of tokens, zero or more; anything else is the caller's error, said plainly."""
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 0:
        raise ValueError(f"a token budget is a whole number >= 0, not {budget_tokens!r}")
    return budget_tokens


# What each role's context on an existing repository may hold, in tokens of the context's JSON as the model gets
# it (the system prompt is apart). A project sets its own per role in settings["context_tokens"].
DEFAULT_CONTEXT_TOKENS = {"tech_lead": 6000, "senior_engineer": 12000, "qc_engineer": 8000}
DEFAULT_ROLE_TOKENS = 6000
MIN_CONTEXT_TOKENS = 500  # below this not even a ticket and one file fit: a setting that small is a mistake


def context_budget(role: str, overrides: Mapping[str, object] | None) -> int:
    """The role's budget: the project's `settings["context_tokens"][role]`, else the default. A bad setting is
    refused with the key to fix, never silently replaced."""
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ValueError(f'settings["context_tokens"] is a mapping of role to tokens, not {overrides!r}')
    value = (overrides or {}).get(role, DEFAULT_CONTEXT_TOKENS.get(role, DEFAULT_ROLE_TOKENS))
    try:
        budget = check_budget(value)
    except ValueError as exc:
        raise ValueError(f'settings["context_tokens"]["{role}"]: {exc}') from None
    if budget < MIN_CONTEXT_TOKENS:
        raise ValueError(f'settings["context_tokens"]["{role}"] is {budget}: at least {MIN_CONTEXT_TOKENS} tokens')
    return budget


def json_tokens(value: object) -> int:
    """The estimate of `value` as a role gets it: JSON with indent=2, as `Agent.messages` writes a context."""
    return estimate_tokens(json.dumps(value, indent=2, ensure_ascii=False))


def json_string_bytes(text: str) -> int:
    """The bytes of `text` inside a JSON string, without its quotes: JSON escapes each character alone, so the
    bytes of a text are the sum of its lines'."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", errors="surrogateescape")) - 2


def fit_lines(text: str, budget_tokens: int) -> str:
    """The longest run of `text`'s first whole lines whose JSON string stays within the budget ("" if none)."""
    check_budget(budget_tokens)
    if json_tokens(text) <= budget_tokens:
        return text
    lines = text.splitlines(keepends=True)
    low, high = 0, len(lines)  # more lines never make the text shorter: binary search the largest prefix
    while low < high:
        middle = (low + high + 1) // 2
        if json_tokens("".join(lines[:middle])) <= budget_tokens:
            low = middle
        else:
            high = middle - 1
    return "".join(lines[:low])
