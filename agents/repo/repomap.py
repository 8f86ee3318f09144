"""The repository map: the best-ranked definitions of the repository, one line each, grouped by file, cut to a
hard token budget.

    django/db/models/query.py
      303│class QuerySet(AltersData):
     1493│    def filter(self, *args, **kwargs):

A method is shown under its class line, so the model sees where it lives. The cut is a binary search over how many
ranked entries fit: more entries never make the text shorter, so the largest prefix within the budget is found in
log2(n) renders, and the text handed back is always within the budget, empty when not even one entry fits.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from agents.repo.budget import check_budget, estimate_tokens
from agents.repo.files import RepoIndexError
from agents.repo.index import RepoIndex
from agents.repo.rank import Focus, Ranking, focus_of, rank
from agents.repo.symbols import Symbol

MENTIONED_FILE_WEIGHT = 1.0
OTHER_FILE_WEIGHT = 0.01  # a definition nobody uses still orders by its file's rank, below the used ones


@dataclass(frozen=True, slots=True)
class MapEntry:
    """One line of the map and why it is there."""
    path: str
    qualname: str | None  # None: a file with no definitions, listed by its path
    line: int | None
    score: float
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RepoMap:
    text: str
    tokens: int  # estimate_tokens(text), never above budget_tokens
    budget_tokens: int
    entries: tuple[MapEntry, ...]  # what the text shows, best first
    candidates: int  # how many entries were ranked; the rest did not fit
    focus: Focus  # the files and identifiers of the ticket, and the caller's paths, that steered the ranking


def repo_map(index: RepoIndex, budget_tokens: int, ticket: str = "", focus_paths: Iterable[str] = ()) -> RepoMap:
    """The map of `index` within `budget_tokens`, leaning towards what `ticket` names and towards `focus_paths`
    (paths of the repository, e.g. the files a localization step chose; any other path is an error)."""
    check_budget(budget_tokens)
    if isinstance(focus_paths, str):  # one path passed bare would otherwise be read as its characters
        raise ValueError("focus_paths is a list of paths, not one string")
    given = frozenset(focus_paths)
    unknown = sorted(given - index.paths)
    if unknown:
        raise RepoIndexError(f"not files of commit {index.sha[:12]}: {unknown[:5]}")
    focus = focus_of(index, ticket, given)
    ranked = ranked_entries(index, focus, rank(index, focus))
    count = _largest_fit(index, ranked, budget_tokens)
    text = render(index, ranked[:count])
    return RepoMap(text, estimate_tokens(text), budget_tokens, tuple(ranked[:count]), len(ranked), focus)


def ranked_entries(index: RepoIndex, focus: Focus, ranking: Ranking) -> list[MapEntry]:
    """Best first. The focus files come before the rest, taking turns: the best definition of each, then the second
    of each, and so on, so one large file the ticket names cannot crowd out the others within the budget."""
    entries = [_symbol_entry(symbol, focus, ranking) for symbol in index.symbols]
    for info in index.files:
        if info.path not in index.symbols_by_path:
            weight = MENTIONED_FILE_WEIGHT if info.path in focus.files else OTHER_FILE_WEIGHT
            entries.append(MapEntry(info.path, None, None, ranking.file_rank[info.path] * weight,
                                    _file_reasons(info.path, focus)))
    entries.sort(key=lambda e: (-e.score, e.path, e.line or 0))
    focused, rest, turns = [], [], Counter[str]()
    for entry in entries:
        if entry.path in focus.files:
            focused.append((turns[entry.path], len(focused), entry))  # (its turn, then best first)
            turns[entry.path] += 1
        else:
            rest.append(entry)
    return [entry for *_, entry in sorted(focused)] + rest


def _file_reasons(path: str, focus: Focus) -> tuple[str, ...]:
    return tuple(reason for reason, applies in (("file named in the ticket", path in focus.paths),
                                                ("file given as focus", path in focus.given)) if applies)


def _symbol_entry(symbol: Symbol, focus: Focus, ranking: Ranking) -> MapEntry:
    """Rank flowing in from the files that use the name, plus a share of its own file's rank: all of it when the
    ticket names the file or the definition, so what the ticket names comes first even if nothing uses it."""
    key = (symbol.path, symbol.name)
    boost = focus.boost(symbol.name)
    own = MENTIONED_FILE_WEIGHT if symbol.path in focus.files or boost > 1 else OTHER_FILE_WEIGHT
    score = (ranking.definition_score.get(key, 0.0) + ranking.file_rank[symbol.path] * own) * boost
    reasons = list(_file_reasons(symbol.path, focus))
    if symbol.name in focus.identifiers:
        reasons.append(f"defines {symbol.name}, named in the ticket")
    elif symbol.name in focus.words:
        reasons.append(f"defines {symbol.name}, a word of the ticket")
    if ranking.used_by.get(key):
        reasons.append(f"{symbol.name} used by {ranking.used_by[key]} other files")
    return MapEntry(symbol.path, symbol.qualname, symbol.line, round(score, 8), tuple(reasons))


def _largest_fit(index: RepoIndex, ranked: list[MapEntry], budget: int) -> int:
    low, high = 0, len(ranked)  # render(ranked[:low]) fits; find the largest such prefix
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_tokens(render(index, ranked[:middle])) <= budget:
            low = middle
        else:
            high = middle - 1
    return low


def render(index: RepoIndex, entries: list[MapEntry]) -> str:
    chosen: dict[str, set[str]] = {}
    for entry in entries:  # files in order of their best entry
        names = chosen.setdefault(entry.path, set())
        if entry.qualname:
            parts = entry.qualname.split(".")
            names.update(".".join(parts[: i + 1]) for i in range(len(parts)))  # and the classes it sits in
    lines = []
    for path, names in chosen.items():
        lines.append(path)
        for symbol in index.symbols_by_path.get(path, ()):
            if symbol.qualname in names:
                lines.append(f"{symbol.line:>6}│{'    ' * symbol.depth}{symbol.signature}")
    return "\n".join(lines) + "\n" if lines else ""
