"""A file as a role sees it within a token budget: whole when it fits, else as much of it as the budget holds, the
most wanted lines first (the definitions asked for, the file's head, the lines around those definitions, then the
rest from the top), as chunks of whole lines that each start at a known line, so a search/replace block can quote
them exactly as the file has them.

    chunks = excerpt("shop/cart.py", text, budget_tokens=800, symbols=["Cart.total"])   # [Chunk(1, ...), ...]

The budget is held on the chunks' text as JSON strings (`json_tokens`), the form a context carries them in.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from agents.repo.budget import BYTES_PER_TOKEN, check_budget, json_string_bytes, json_tokens
from agents.repo.symbols import parse_python

HEAD_LINES = 30  # a Python file's imports and module constants: what a definition shown alone refers to
AROUND_LINES = 60  # on each side of a definition asked for: its neighbours, before the rest of the file
CHUNK_OVERHEAD_TOKENS = 24  # the keys, punctuation and indentation around each chunk in a context's JSON


@dataclass(frozen=True, slots=True)
class Chunk:
    start_line: int  # from 1, as an editor shows it
    text: str  # whole lines, endings kept


def whole_fits(text: str, budget_tokens: int) -> bool:
    return json_tokens(text) + CHUNK_OVERHEAD_TOKENS <= budget_tokens


def excerpt(path: str, text: str, budget_tokens: int, symbols: Sequence[str] = ()) -> list[Chunk]:
    """`text` whole if it fits; else the longest run of its lines, most wanted first (`wanted_order`), that fits
    as chunks of consecutive whole lines, in file order. [] when not even a line fits."""
    check_budget(budget_tokens)
    if whole_fits(text, budget_tokens):
        return [Chunk(1, text)] if text else []
    lines = text.split("\n")  # not splitlines(): a form feed or U+2028 does not start a line in an editor
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    shown = sorted(_fitting(wanted_order(path, text, symbols, len(lines)), lines, budget_tokens))
    chunks, first = [], 0
    for i, line in enumerate(shown):
        if i + 1 == len(shown) or shown[i + 1] != line + 1:  # the end of a run of consecutive lines
            chunks.append(Chunk(shown[first] + 1, "".join(lines[shown[first]:line + 1])))
            first = i + 1
    return chunks


def wanted_order(path: str, text: str, symbols: Sequence[str], count: int) -> list[int]:
    """Every line's index (from 0) once, most wanted first: the definitions named (qualified names, or bare names
    matching any definition of that name), the head, up to AROUND_LINES each side of those definitions (the
    nearest first), then the rest of the file from the top."""
    parsed = parse_python(path, text) if symbols and path.endswith((".py", ".pyi")) else None
    spans = [(s.line - 1, s.end_line) for name in symbols if parsed for s in parsed[0]
             if s.qualname == name or s.name == name]
    order = [i for start, end in spans for i in range(start, end)]
    order += range(min(HEAD_LINES, count))
    order += [i for step in range(1, AROUND_LINES + 1) for start, end in spans for i in (start - step, end - 1 + step)
              if 0 <= i < count]
    order += range(count)
    return list(dict.fromkeys(order))


def _fitting(order: list[int], lines: list[str], budget_tokens: int) -> list[int]:
    """The longest start of `order` whose lines, as chunks of consecutive lines, cost at most the budget. Each line
    is added in O(1): a chunk's JSON string is its lines' escaped bytes plus the quotes."""
    sums = [0, *accumulate(json_string_bytes(line) for line in lines)]

    def cost(first: int, last: int) -> int:
        return math.ceil((2 + sums[last + 1] - sums[first]) / BYTES_PER_TOKEN) + CHUNK_OVERHEAD_TOKENS

    last_of, first_of, used = {}, {}, 0  # a chunk's first line -> its last, and its last -> its first
    for taken, i in enumerate(order):
        first, last = first_of.get(i - 1, i), last_of.get(i + 1, i)
        merged = (cost(first, i - 1) if first < i else 0) + (cost(i + 1, last) if last > i else 0)
        if used + cost(first, last) - merged > budget_tokens:
            return order[:taken]
        used += cost(first, last) - merged
        first_of.pop(i - 1, None)
        last_of.pop(i + 1, None)
        last_of[first], first_of[last] = last, first
    return order
