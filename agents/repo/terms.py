"""Identifier-aware terms: what both the index and a query are cut into, so they meet on the same words.

`HttpResponseRedirect` → http, response, redirect, httpresponseredirect; `get_user_model` → get, user, model,
get_user_model. The parts let "user model" find `get_user_model`; the whole name, kept as well, ranks an exact
mention above a document that only shares the parts.
"""
from __future__ import annotations

import re
from functools import lru_cache

WORD_RE = re.compile(r"[A-Za-z0-9_]+")
PART_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
STOPWORDS = frozenset(
    "a an and are as at be but by for from has have if in into is it its not of on or so that the their then "
    "there these this to was were when which while will with self cls def return none true false".split()
)


def terms(text: str) -> list[str]:
    out: list[str] = []
    for word in WORD_RE.findall(text):
        out += word_terms(word)
    return out


@lru_cache(maxsize=65536)  # a repository repeats its identifiers; splitting each once halves indexing
def word_terms(word: str) -> tuple[str, ...]:
    parts = [p.lower() for p in PART_RE.findall(word)]
    kept = [p for p in parts if len(p) > 1 and p not in STOPWORDS]
    whole = word.strip("_").lower()
    return (*kept, whole) if len(parts) > 1 and whole else tuple(kept)


def identifiers(text: str) -> set[str]:
    """The identifier-shaped words of free text, as written: what a ticket can name a definition by."""
    return {w for w in WORD_RE.findall(text) if not w.isdigit()}
