"""Where a block's search lines are in a file: exact places, places off by a uniform indentation, the nearest lines.

Matching is on whole lines, endings aside (a block written with '\\n' finds a CRLF file's lines). Exact places
come first; only when there is none does a uniform indentation difference count, as Aider accepts it: models
often drop or add the enclosing indentation of a method body, and shifting every line by the same prefix keeps
the block's own structure (the parse check after the edits catches what it would not).
"""
from __future__ import annotations

import heapq
import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from itertools import accumulate

CANDIDATES = 25
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Place:
    start: int  # index of the first matched line, from 0
    add: str = ""  # indentation the file has that the block lacks: added to the replace lines
    remove: str = ""  # indentation the block has that the file lacks: taken from the replace lines


def exact_places(lines: list[str], search: list[str]) -> list[Place]:
    n, first = len(search), search[0]
    return [Place(i) for i in range(len(lines) - n + 1) if lines[i] == first and lines[i: i + n] == search]


def shifted_places(lines: list[str], search: list[str]) -> list[Place]:
    """Places where every non-blank line differs from the block's by one same leading-whitespace prefix."""
    n = len(search)
    anchor = next(k for k, line in enumerate(search) if line.strip())
    key = search[anchor].lstrip()  # only lines equal to it but for leading whitespace can start a place
    starts = [i - anchor for i, line in enumerate(lines) if line.endswith(key) and line.lstrip() == key]
    found = [(i, _shift(lines[i: i + n], search)) for i in starts if 0 <= i <= len(lines) - n]
    return [Place(i, *shift) for i, shift in found if shift is not None]


def _shift(window: list[str], search: list[str]) -> tuple[str, str] | None:
    """(add, remove) that turns the block's lines into the window's, or None. Blank lines match blank lines."""
    pairs = [(have, want) for have, want in zip(window, search, strict=True) if want.strip() or have.strip()]
    if not pairs or any(not have.strip() or not want.strip() for have, want in pairs):
        return None
    have, want = pairs[0]
    if have.endswith(want) and not have[: len(have) - len(want)].strip():
        shift = (have[: len(have) - len(want)], "")
    elif want.endswith(have) and not want[: len(want) - len(have)].strip():
        shift = ("", want[: len(want) - len(have)])
    else:
        return None
    add, remove = shift
    ok = all(have == add + want[len(remove):] and want.startswith(remove) for have, want in pairs)
    return shift if ok and (add or remove) else None


def reindent(lines: list[str], place: Place) -> list[str] | None:
    """The replace lines shifted as the search lines were; None when a line lacks the indentation to remove."""
    if any(line.strip() and not line.startswith(place.remove) for line in lines):
        return None
    return [place.add + line[len(place.remove):] if line.strip() else line for line in lines]


def nearest(lines: list[str], search: list[str]) -> tuple[int, float]:
    """(start, similarity 0..1) of the window of the block's size most like it. difflib's ratio is exact but too
    slow for every window of a large file, so it scores only the windows sharing the most words with the block."""
    n = min(len(search), len(lines))
    wanted = set(_WORD.findall("\n".join(search)))
    sums = list(accumulate((sum(word in wanted for word in _WORD.findall(line)) for line in lines), initial=0))
    starts = heapq.nlargest(CANDIDATES, range(len(lines) - n + 1), key=lambda i: (sums[i + n] - sums[i], -i))
    matcher = SequenceMatcher(autojunk=False)
    matcher.set_seq2("\n".join(search))
    scored = []
    for i in starts:
        matcher.set_seq1("\n".join(lines[i: i + n]))
        scored.append((matcher.ratio(), -i))
    ratio, start = max(scored)
    return -start, ratio
