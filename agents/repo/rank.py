"""Which files and definitions matter for a ticket: a personalised PageRank over who uses what (graph.py).

The walk restarts at the files the ticket names and the files defining the
identifiers it names (9/10 of the restarts), so the ranking leans towards them; with no ticket it is plain
PageRank. Links through a name the ticket names weigh ten times more. A definition's score is the rank that flows
to it along the links to it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from agents.repo.index import RepoIndex
from agents.repo.terms import identifiers

DAMPING = 0.85
MENTION_BOOST = 10.0
FOCUS_SHARE = 0.9
MAX_TICKET_CHARS = 20_000  # what steers the ranking; a longer ticket is read this far, not refused
MAX_AMBIGUOUS_PATHS = 5  # a basename the ticket names ("utils.py") picks at most this many files
CANDIDATE_RE = re.compile(r"[^\s'\"`()\[\]{}<>,;:!?]+")
CODE_SPAN_RE = re.compile(r"`([^`\n]{1,200})`")


@dataclass(frozen=True, slots=True)
class Focus:
    """What steered the ranking: files and identifiers the ticket names (only ones the index holds), and files the
    caller gave."""
    paths: frozenset[str]
    identifiers: frozenset[str]
    given: frozenset[str] = frozenset()

    @property
    def files(self) -> frozenset[str]:
        return self.paths | self.given


@dataclass(frozen=True, slots=True)
class Ranking:
    file_rank: dict[str, float]
    definition_score: dict[tuple[str, str], float]  # (path, name) → rank flowing to it
    used_by: dict[tuple[str, str], int]  # (path, name) → how many other files use it


def focus_of(index: RepoIndex, ticket: str, given: frozenset[str] = frozenset()) -> Focus:
    """Files and identifiers the ticket names, matched against the index: text never becomes a path of its own."""
    found: set[str] = set()
    by_base: dict[str, list[str]] = {}
    for path in index.paths:
        by_base.setdefault(path.rpartition("/")[2], []).append(path)
    ticket = ticket[:MAX_TICKET_CHARS]
    for word in set(CANDIDATE_RE.findall(ticket)):
        found |= _paths_named(index, by_base, word.rstrip("."))
    defined = {s.name for s in index.symbols}
    quoted = {w for span in CODE_SPAN_RE.findall(ticket) for w in identifiers(span)}
    codelike = {w for w in identifiers(ticket) if "_" in w or not w.islower()}
    names = {w for w in (quoted | codelike) & defined if len(w) >= 3}
    return Focus(frozenset(found), frozenset(names), given)


def _paths_named(index: RepoIndex, by_base: dict[str, list[str]], word: str) -> set[str]:
    word = word.removeprefix("./")
    module = word.replace(".", "/")
    exact = [c for c in (word, f"{module}.py", f"{module}/__init__.py") if c in index.paths]
    if exact:
        return set(exact)
    if "/" in word:
        tails = [p for p in index.paths if p.endswith("/" + word)]
        return set(tails) if len(tails) <= MAX_AMBIGUOUS_PATHS else set()
    if "." in word and len(by_base.get(word, ())) <= MAX_AMBIGUOUS_PATHS:
        return set(by_base.get(word, ()))
    return set()


def rank(index: RepoIndex, focus: Focus) -> Ranking:
    links = index.links
    at = {path: i for i, path in enumerate(links.nodes)}
    named = np.array([name in focus.identifiers for _, name in links.keys], dtype=bool)
    weights = links.weight * np.where(named, MENTION_BOOST, 1.0)[links.key]
    out = np.bincount(links.src, weights=weights, minlength=len(links.nodes))
    share = weights / out[links.src]  # each link's part of its file's outgoing weight; out > 0 wherever src links
    ranks = _pagerank(links.src, links.dst, share, out == 0, _personalisation(index, focus, at, len(links.nodes)))
    scores = np.bincount(links.key, weights=ranks[links.src] * share, minlength=len(links.keys))
    counts = np.bincount(links.key, minlength=len(links.keys))
    return Ranking({path: float(ranks[i]) for i, path in enumerate(links.nodes)},
                   {key: float(scores[i]) for i, key in enumerate(links.keys)},
                   {key: int(counts[i]) for i, key in enumerate(links.keys)})


def _personalisation(index: RepoIndex, focus: Focus, at: dict[str, int], size: int) -> np.ndarray:
    """Where the walk restarts: mostly at the focus, a little everywhere, so the files the focus never reaches
    still keep the order the whole repository gives them."""
    uniform = np.full(size, 1.0 / max(size, 1))
    targets = set(focus.files) | {s.path for s in index.symbols if s.name in focus.identifiers}
    if not targets:
        return uniform
    vector = np.zeros(size)
    vector[[at[path] for path in targets]] = 1.0 / len(targets)
    return FOCUS_SHARE * vector + (1 - FOCUS_SHARE) * uniform


def _pagerank(src: np.ndarray, dst: np.ndarray, share: np.ndarray, dangling: np.ndarray, personal: np.ndarray,
              iterations: int = 100, tolerance: float = 1e-9) -> np.ndarray:
    """Power iteration; a file that links nowhere hands its rank back through the restart vector."""
    ranks = personal.copy()
    for _ in range(iterations):
        new = DAMPING * np.bincount(dst, weights=ranks[src] * share, minlength=len(ranks))
        new += (DAMPING * ranks[dangling].sum() + 1 - DAMPING) * personal
        if np.abs(new - ranks).sum() < tolerance:
            return new
        ranks = new
    return ranks
