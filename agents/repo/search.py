"""Lexical search over the repository's classes, functions and methods: BM25 (the `bm25s` library) over each
definition's terms (its split name and path, arguments, docstring summary and the names its body uses).

A query is cut by the same `terms()` as the documents, so "user model" meets `get_user_model`. Each hit says which
of the query's terms it matched, for the record of why it went into a prompt.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import bm25s

from agents.repo.symbols import Symbol
from agents.repo.terms import terms

logging.getLogger("bm25s").setLevel(logging.NOTSET)  # it sets DEBUG on import: the logging configuration decides

MAX_QUERY_CHARS = 20_000  # a ticket pasted whole is still a query; past this it is cut, not refused
MAX_LIMIT = 500


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
        if symbols:  # bm25s keeps a row for each document, an empty one too, so row i is symbols[i]
            self.bm25.index([list(s.terms) for s in symbols], show_progress=False)

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"a search limit is a whole number from 1 to {MAX_LIMIT}, not {limit!r}")
        wanted = [t for t in dict.fromkeys(terms(query[:MAX_QUERY_CHARS])) if t in self.bm25.vocab_dict]
        if not wanted or not self.symbols:
            return []
        ids, scores = self.bm25.retrieve([wanted], k=min(limit, len(self.symbols)), show_progress=False)
        hits = []
        for doc, score in zip(ids[0], scores[0], strict=True):
            if score <= 0:
                break
            symbol = self.symbols[int(doc)]
            own = set(symbol.terms)
            matched = tuple(t for t in wanted if t in own)
            hits.append(SearchHit(symbol.path, symbol.qualname, symbol.kind, symbol.line, symbol.end_line,
                                  symbol.signature, round(float(score), 4), matched))
        return hits
