"""A file as a role sees it within a token budget: whole when it fits, else the definitions asked for and the
file's head (its imports), as chunks that each start at a known line, so a search/replace block can quote them
exactly as the file has them.

    chunks = excerpt("shop/cart.py", text, budget_tokens=800, symbols=["Cart.total"])   # [Chunk(1, ...), ...]

The budget is held on the chunks' text as JSON strings (`json_tokens`), the form a context carries them in.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agents.repo.budget import check_budget, fit_lines, json_tokens
from agents.repo.symbols import parse_python

HEAD_LINES = 30  # a Python file's imports and module constants: what a definition shown alone refers to
CHUNK_OVERHEAD_TOKENS = 12  # the keys and punctuation around each chunk in the context's JSON


@dataclass(frozen=True, slots=True)
class Chunk:
    start_line: int  # from 1, as an editor shows it
    text: str  # whole lines, endings kept


def excerpt(path: str, text: str, budget_tokens: int, symbols: Sequence[str] = ()) -> list[Chunk]:
    """`text` whole if it fits; else the named definitions (qualified names, or bare names matching any
    definition of that name) and then the file's head, each cut to whole lines, in file order. [] when not even a
    line fits."""
    check_budget(budget_tokens)
    if json_tokens(text) + CHUNK_OVERHEAD_TOKENS <= budget_tokens:
        return [Chunk(1, text)] if text else []
    lines = text.splitlines(keepends=True)
    chosen: list[Chunk] = []
    left = budget_tokens
    for start, end in _ranges(path, text, symbols, len(lines)):
        start, end = _unshown(chosen, start, end)
        if start > end or left <= CHUNK_OVERHEAD_TOKENS:
            continue
        cut = fit_lines("".join(lines[start - 1:end]), left - CHUNK_OVERHEAD_TOKENS)
        if cut:
            chosen.append(Chunk(start, cut))
            left -= json_tokens(cut) + CHUNK_OVERHEAD_TOKENS
    return sorted(chosen, key=lambda chunk: chunk.start_line)


def _ranges(path: str, text: str, symbols: Sequence[str], count: int) -> list[tuple[int, int]]:
    """Line ranges (from 1, inclusive) to show, most wanted first: the definitions named, then the head."""
    wanted = []
    parsed = parse_python(path, text) if symbols and path.endswith((".py", ".pyi")) else None
    for name in symbols if parsed else ():
        wanted += [(s.line, s.end_line) for s in parsed[0] if s.qualname == name or s.name == name]
    return [*dict.fromkeys(wanted), (1, min(HEAD_LINES if wanted else count, count))]


def _unshown(chosen: list[Chunk], start: int, end: int) -> tuple[int, int]:
    """`start..end` without the lines chosen chunks show at its edges (a method of a class shown already, the head
    after a definition near the top); start > end when all of it is shown."""
    for chunk in chosen:
        shown_end = chunk.start_line + chunk.text.count("\n") - (0 if chunk.text.endswith("\n") else 1)
        if chunk.start_line <= start <= shown_end:
            start = shown_end + 1
        elif start < chunk.start_line <= end:
            end = chunk.start_line - 1
    return start, end
