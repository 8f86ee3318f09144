"""Identifier-aware terms: what both the index and a query are cut into, so they meet on the same words.

`HttpResponseRedirect` → http, response, redirect, httpresponseredirect; `get_user_model` → get, user, model,
get_user_model. The parts let "user model" find `get_user_model`; the whole name, kept as well, ranks an exact
mention above a document that only shares the parts.

A ticket's words are also read for the names it writes as code (`code_names`) and its plain lower-case words
(`plain_words`): what a ticket can name a definition by (agents/repo/rank.py and search.py decide what each counts
for, against the names the repository defines).
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
IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
CODE_SPAN_RE = re.compile(r"`([^`\n]{1,200})`")
URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S*")  # docs.python.org/3/… is not `python.org`
# How prose writes code: a name after a dot that follows a name or a call (`toolz.groupby`, `Cfg('x').get`), or a
# name before an opening parenthesis (`groupby(`).
DOTTED_OR_CALLED_RE = re.compile(rf"(?<=[A-Za-z0-9_)\]]\.)({IDENTIFIER})|\b({IDENTIFIER})(?=\()")


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


def code_names(text: str) -> set[str]:
    """The words `text` writes as code: inside backticks, with an underscore or a capital (`ensure_str`,
    `TTLCache`), after a dot (`toolz.groupby`) or before a call's parenthesis (`groupby(`). URLs are left out."""
    text = URL_RE.sub(" ", text)
    quoted = {w for span in CODE_SPAN_RE.findall(text) for w in identifiers(span)}
    shaped = {w for w in identifiers(text) if "_" in w or not w.islower()}
    written = {dotted or called for dotted, called in DOTTED_OR_CALLED_RE.findall(text)}
    return {w for w in quoted | shaped | written if not w[0].isdigit()}


def plain_words(text: str) -> set[str]:
    """The plain lower-case words of `text` ("groupby", "evolve", "total"), stop words and one- and two-letter
    words left out: English or a name, which only the repository's definitions can tell."""
    return {w for w in WORD_RE.findall(URL_RE.sub(" ", text))
            if w.isalpha() and w.islower() and len(w) >= 3 and w not in STOPWORDS}
