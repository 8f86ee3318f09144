"""Which files and definitions matter for a ticket: a personalised PageRank over who uses what (graph.py).

The walk restarts at the files the ticket names and the files defining the
identifiers it names (9/10 of the restarts), so the ranking leans towards them; with no ticket it is plain
PageRank. Links through a name the ticket names weigh ten times more. A definition's score is the rank that flows
to it along the links to it.

A name the ticket writes as code (`toolz.groupby(`, `ensure_str`) is surely meant; a plain word that is exactly a
defined name ("evolve", but also "last", "keys", "login") may be English. Such words steer too, more weakly: their
links weigh WORD_BOOST times more instead of ten, their files get WORD_SHARE of a named file's restarts, so a
ticket that names `Paginator.get_page` still leads there when it also says "the last page".
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from agents.repo.graph import MANY_DEFINERS
from agents.repo.index import RepoIndex
from agents.repo.terms import code_names, plain_words

DAMPING = 0.85
MENTION_BOOST = 10.0
WORD_BOOST = 3.0
WORD_SHARE = 0.25
FOCUS_SHARE = 0.9
MAX_TICKET_CHARS = 20_000  # what steers the ranking; a longer ticket is read this far, not refused
MAX_AMBIGUOUS_PATHS = 5  # a basename the ticket names ("utils.py") picks at most this many files
CANDIDATE_RE = re.compile(r"[^\s'\"`()\[\]{}<>,;:!?]+")


@dataclass(frozen=True, slots=True)
class Focus:
    """What steered the ranking: files and identifiers the ticket names (only ones the index holds), files the
    caller gave, and the ticket's plain words that are names the repository defines (weaker than identifiers)."""
    paths: frozenset[str]
    identifiers: frozenset[str]
    given: frozenset[str] = frozenset()
    words: frozenset[str] = frozenset()

    @property
    def files(self) -> frozenset[str]:
        return self.paths | self.given

    def boost(self, name: str) -> float:
        """How much more a link through `name`, and a definition of it, weighs for this ticket."""
        return MENTION_BOOST if name in self.identifiers else WORD_BOOST if name in self.words else 1.0


@dataclass(frozen=True, slots=True)
class Ranking:
    file_rank: dict[str, float]
    definition_score: dict[tuple[str, str], float]  # (path, name) → rank flowing to it
    used_by: dict[tuple[str, str], int]  # (path, name) → how many other files use it


def focus_of(index: RepoIndex, ticket: str, given: frozenset[str] = frozenset()) -> Focus:
    """Files and identifiers the ticket names, matched against the index: text never becomes a path of its own.

    A name of the ticket counts when the repository defines it (a class, function or method of that name): as an
    identifier when the ticket writes it as code (`code_names`: backticks, an underscore or a capital,
    `toolz.groupby`, `groupby(`), as a word when it is a plain lower-case word ("groupby", "evolve") that at most
    MANY_DEFINERS files define (which `get` or `save` a plain "get" means, nothing says)."""
    found: set[str] = set()
    by_base: dict[str, list[str]] = {}
    for path in index.paths:
        by_base.setdefault(path.rpartition("/")[2], []).append(path)
    ticket = ticket[:MAX_TICKET_CHARS]
    for word in set(CANDIDATE_RE.findall(ticket)):
        found |= _paths_named(index, by_base, word.rstrip("."))
    definers = index.definers
    written = {w for w in code_names(ticket) if w in definers and len(w) >= 3}
    plain = {w for w in plain_words(ticket) if 0 < len(definers.get(w, ())) <= MANY_DEFINERS} - written
    return Focus(frozenset(found), frozenset(written), given, frozenset(plain))


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
    boost = np.array([focus.boost(name) for _, name in links.keys], dtype=np.float64)
    weights = links.weight * boost[links.key]
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
    targets = dict.fromkeys((path for word in focus.words for path in index.definers[word]), WORD_SHARE)
    targets.update(dict.fromkeys(focus.files | {p for name in focus.identifiers for p in index.definers[name]}, 1.0))
    if not targets:
        return uniform
    vector = np.zeros(size)
    vector[[at[path] for path in targets]] = list(targets.values())
    return FOCUS_SHARE * vector / vector.sum() + (1 - FOCUS_SHARE) * uniform


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
