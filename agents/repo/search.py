"""Lexical search over the repository's classes, functions and methods: BM25 (the `bm25s` library) over each
definition's terms (its split name and path, arguments, docstring summary and the names its body uses).

A query is cut by the same `terms()` as the documents, so "user model" meets `get_user_model`. Each hit says which
of the query's terms it matched, for the record of why it went into a prompt.

Two rules on top of BM25:
- A term found in (nearly) every definition (COMMON_SHARE of them, in an index of MIN_DOCS_FOR_COMMON or more) is
  dropped from the query: the package's own name ("toolz", "six") is in every definition's path. BM25's idf
  already gives it next to no weight (0.012 for "toolz" in 383 of 387 definitions), but it was still listed as
  matched in every hit, which told the reader nothing and cost tokens in each.
- Of a long query (a pasted traceback), only the MAX_QUERY_TERMS rarest terms count: scoring is one pass over
  their postings, so a 20,000-character query on a large repository costs little more than a short one.
- A definition the query names as code (`toolz.groupby(...)`, `ensure_str`, `groupby(`: terms.code_names) comes
  before the others, best first among themselves: a ticket's words about the failure ("raises TypeError") are
  shared by many tests and would otherwise outscore the one function it names.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import bm25s
import numpy as np

from agents.repo.symbols import Symbol
from agents.repo.terms import code_names, terms

logging.getLogger("bm25s").setLevel(logging.NOTSET)  # it sets DEBUG on import: the logging configuration decides

MAX_QUERY_CHARS = 20_000  # a ticket pasted whole is still a query; past this it is cut, not refused
MAX_LIMIT = 500
MAX_QUERY_TERMS = 256
COMMON_SHARE = 0.9
MIN_DOCS_FOR_COMMON = 20  # in a handful of definitions, one term in all of them may still tell them apart


@dataclass(frozen=True, slots=True)
class SearchHit:
    path: str
    qualname: str
    kind: str
    line: int
    end_line: int
    signature: str
    score: float
    matched_terms: tuple[str, ...]


class SymbolSearch:
    def __init__(self, symbols: list[Symbol]) -> None:
        self.symbols = symbols
        self.bm25 = bm25s.BM25()
        self.by_name: dict[str, list[int]] = {}
        for i, symbol in enumerate(symbols):
            self.by_name.setdefault(symbol.name, []).append(i)
        if symbols:  # bm25s keeps a row for each document, an empty one too, so row i is symbols[i]
            self.bm25.index([list(s.terms) for s in symbols], show_progress=False)

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"a search limit is a whole number from 1 to {MAX_LIMIT}, not {limit!r}")
        query = query[:MAX_QUERY_CHARS]
        wanted = [t for t in dict.fromkeys(terms(query)) if t in self.bm25.vocab_dict]
        if not wanted or not self.symbols:
            return []
        if len(self.symbols) >= MIN_DOCS_FOR_COMMON:
            wanted = [t for t in wanted if self._df(t) < COMMON_SHARE * len(self.symbols)]
        # the rarest terms, at most MAX_QUERY_TERMS of them: a pasted traceback adds thousands that say little
        rarest = set(sorted(wanted, key=self._df)[:MAX_QUERY_TERMS])
        wanted = [t for t in wanted if t in rarest]  # in the query's order, as the hits list them
        if not wanted:
            return []
        scores = self.bm25.get_scores(wanted)  # one pass over the terms' postings, whatever the index's size
        named = np.zeros(len(self.symbols), dtype=bool)
        for name in code_names(query):
            named[self.by_name.get(name, [])] = True
        first = named & (scores > 0)
        order = np.lexsort((-scores, ~first))  # the named ones first, then by score; ties keep the index's order
        hits = []
        for doc in order[:limit]:
            if scores[doc] <= 0:
                break
            symbol = self.symbols[int(doc)]
            own = set(symbol.terms)
            matched = tuple(t for t in wanted if t in own)
            hits.append(SearchHit(symbol.path, symbol.qualname, symbol.kind, symbol.line, symbol.end_line,
                                  symbol.signature, round(float(scores[doc]), 4), matched))
        return hits

    def _df(self, term: str) -> int:
        """How many definitions hold the term: its postings' length in the index's sparse matrix."""
        column = self.bm25.vocab_dict[term]
        pointers = self.bm25.scores["indptr"]
        return int(pointers[column + 1] - pointers[column])
