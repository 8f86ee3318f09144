"""The parts of a role's context that come from an existing repository, cut to the role's token budget
(docs/adr/0035): files whole or in excerpts, the ranked map and the search hits, and the record of what went in.

A budget is the project's `settings["context_tokens"][role]` or the default (agents/repo/budget.py), held on the
whole context as the model gets it (its JSON, `json_tokens`): the fixed part (the ticket, the task) is counted
first and the repository's parts fill what is left, best first, however large the repository.
"""
from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction

from agents.edits import read_files
from agents.environments.baseline import FAILED
from agents.repo import RepoIndex, index_repository, repo_map, search
from agents.repo.budget import context_budget, estimate_tokens, fit_lines, json_tokens
from agents.repo.excerpts import excerpt, whole_fits
from agents.repo.workspace import RepoWorkspace
from agents.schemas import (
    BaselineFacts,
    ContextSource,
    Excerpt,
    FileView,
    LocalizeContext,
    LocatedFile,
    RepoCodeReviewContext,
    SearchHitView,
    SourceFile,
)
from agents.schemas.repository import RepositoryContext
from lifecycle.models import Project, Requirement
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.development import workspace_aligned
from lifecycle.services.preparation import BASELINE_NAME
from lifecycle.states import ArtifactKind

C = TypeVar("C", bound=RepositoryContext)
BASELINE_TESTS_LISTED = 20  # test ids named per list of the baseline's facts; the counts say the rest
VIEW_FLOOR_TOKENS = 60  # what a file's entry costs without its text: kept for each file still to come
LIST_OPENED_TOKENS = 4  # a view's "excerpts": [] opened onto lines to hold its chunks


@dataclass(frozen=True)
class Wanted:
    """A file a context should show, and why; its definitions to show first when the whole file does not fit."""

    path: str
    why: str
    symbols: tuple[str, ...] = ()


def budget_for(project: Project, role: str) -> int:
    return context_budget(role, (project.settings or {}).get("context_tokens"))


@contextmanager
def checkout(requirement_id) -> Iterator[RepoWorkspace]:
    """The workspace at the commit the database records, under the requirement's lock while the block reads it:
    parallel engineer tasks apply while others build their contexts (as development.workspace_files)."""
    with transaction.atomic():
        yield workspace_aligned(requirement_id)


def repository_index(requirement: Requirement, workspace: RepoWorkspace, commit: str) -> RepoIndex:
    """The index of `commit` in the workspace, cached by commit next to the project's mirror."""
    cache = Path(settings.AITEAM_MIRROR_ROOT) / f"{requirement.project_id}.index"
    return index_repository(workspace.path, cache_dir=cache, rev=commit,
                            max_total_bytes=settings.AITEAM_REPO_INDEX_MAX_MB * 1024**2)


def localization_of(requirement: Requirement) -> list[LocatedFile]:
    """The Tech Lead's choice of files ([] before it, or for a requirement that never localized)."""
    artifact = latest(requirement, ArtifactKind.LOCALIZATION, "localization")
    return [LocatedFile(**f) for f in content_json(artifact)["files"]] if artifact else []


def baseline_facts(requirement: Requirement) -> BaselineFacts | None:
    """The tests at the base commit as the preparation found them (None before it recorded them): the command, the
    counts, and the first of the tests that failed in both runs and of the flaky ones."""
    artifact = latest(requirement, ArtifactKind.BASELINE, BASELINE_NAME)
    prepared = content_json(artifact) if artifact else None
    if not prepared or not prepared.get("ok"):
        return None
    flaky = set(prepared["flaky"])
    failing = sorted(test for test, kind in prepared["baseline"]["outcomes"].items() if kind in FAILED
                     and test not in flaky)
    return BaselineFacts(test_command=prepared["test_command"]["shown"], counts=prepared["counts"],
                         failing=failing[:BASELINE_TESTS_LISTED], failing_total=len(failing),
                         flaky=sorted(flaky)[:BASELINE_TESTS_LISTED])


def localized(localization: list[LocatedFile], *, skip: set[str] = frozenset()) -> list[Wanted]:
    """The localization's files, the ones to change or create first, then the ones to read."""
    order = {"change": 0, "new": 1, "read": 2}
    return [Wanted(f.path, f"localized ({f.action}): {f.reason}", tuple(f.symbols))
            for f in sorted(localization, key=lambda f: order[f.action]) if f.path not in skip]


def named(paths: list[str], why: str, localization: list[LocatedFile]) -> list[Wanted]:
    """Files wanted for `why`, with the definitions and the reason the localization gave for each it names."""
    located = {f.path: f for f in localization}
    return [Wanted(path, why + (f"; {located[path].reason}" if path in located else ""),
                   tuple(located[path].symbols) if path in located else ()) for path in paths]


def file_views(root: Path, wanted: list[Wanted], budget: int) -> tuple[list[FileView], list[str]]:
    """The files in order, each whole when it fits what is left (keeping a floor for each file after it), else an
    excerpt within a fair share; then what the later files left unused goes to the excerpts, in order. A file with
    no room, or that is no text, is not shown."""
    unique = _unique(wanted)
    found = read_files(root, list(unique))
    views, not_shown, left, count = [], [], budget, len(unique)
    for i, want in enumerate(unique.values()):
        view = _view(want, found.get(want.path), max(left - VIEW_FLOOR_TOKENS * (count - i - 1), 0),
                     max(left // 2, left // (count - i)))
        cost = view_tokens(view) if view else 0
        if view is None or cost > left or (view.total_lines and not view.excerpts):
            not_shown.append(want.path)
            continue
        views.append(view)
        left -= cost
    for n, view in enumerate(views):
        if view.exists and not view.whole and left > 0:
            cost = view_tokens(view)
            grown = _view(unique[view.path], found[view.path], cost + left, cost + left)
            if cost < (grown_cost := view_tokens(grown)) <= cost + left:
                views[n], left = grown, left - (grown_cost - cost)
    return views, not_shown


def _unique(wanted: list[Wanted]) -> dict[str, Wanted]:
    """Each file once, for the first reason it is wanted."""
    unique: dict[str, Wanted] = {}
    for want in wanted:
        unique.setdefault(want.path, want)
    return unique


def _view(want: Wanted, data: object, whole_room: int, share: int) -> FileView | None:
    if data is None:
        return FileView(path=want.path, why=want.why, exists=False, whole=False)
    if not isinstance(data, bytes):
        return None  # a link, a directory: nothing to show or edit
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\0" in text:  # binary past git's first 8,000 bytes: no prompt or record can hold it (agents/repo/files.py)
        return None
    total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    view = FileView(path=want.path, why=want.why, total_lines=total, whole=False)
    frame = view_tokens(view) + LIST_OPENED_TOKENS  # the view without its text
    whole = whole_fits(text, whole_room - frame)
    chunks = excerpt(want.path, text, max((whole_room if whole else min(share, whole_room)) - frame, 0), want.symbols)
    return view.model_copy(update={"whole": whole, "excerpts": [Excerpt(start_line=c.start_line, text=c.text)
                                                                for c in chunks]})


def view_tokens(view: FileView) -> int:
    """A view's tokens as a context's JSON holds it: an item of the context's `files`, each line of the view's own
    JSON four spaces further in, and the comma after it."""
    text = json.dumps(view.model_dump(mode="json"), indent=2, ensure_ascii=False)
    return estimate_tokens(textwrap.indent(text, "    ") + ",\n")


def with_files(context: C, requirement_id, wanted: list[Wanted], budget: int) -> C:
    """`context` with the wanted files as they stand at the recorded commit (`fitted`)."""
    with checkout(requirement_id) as workspace:
        return fitted(context, workspace.path, wanted, budget)


def fitted(context: C, root: Path, wanted: list[Wanted], budget: int) -> C:
    """`context` with the wanted files under `root` in what its fixed part leaves of the budget, held to it
    exactly, and the record of what went in."""
    left = max(budget - json_tokens(context.model_dump(mode="json")), 0)
    files, not_shown = file_views(root, wanted, left)
    context = context.model_copy(update={"files": files, "not_shown": not_shown, "workspace": str(root)})
    return with_sources(held(context, budget, cut=view_cutter(root, wanted)), wanted)


Cut = Callable[[Any, int], Any]  # (the last file, tokens over the budget) -> that file smaller, or None


def _no_cut(file: Any, over: int) -> None:
    return None


def held(context: C, budget: int, cut: Cut = _no_cut) -> C:
    """The context with its JSON within the budget exactly (its files were sized by estimate): while it is over,
    its last file is cut down by the overshoot (`cut`), or dropped and listed in not_shown when `cut` has nothing
    smaller. The fixed part alone may not fit: then no file is shown, and the ticket still goes."""
    while context.files and (over := json_tokens(context.model_dump(mode="json")) - budget) > 0:
        *kept, last = context.files
        if (smaller := cut(last, over)) is not None:
            context = context.model_copy(update={"files": [*kept, smaller]})
        else:
            context = context.model_copy(update={"files": kept, "not_shown": [last.path, *context.not_shown]})
    return context


def view_cutter(root: Path, wanted: list[Wanted]) -> Cut:
    """A cut for `held`: the file view read again from `root` and excerpted in what it costs less the overshoot
    (named definitions first, as `file_views` does); None for a new file, or when not a line of it fits."""
    unique = _unique(wanted)

    def cut(view: FileView, over: int) -> FileView | None:
        data = read_files(root, [view.path]).get(view.path) if view.exists else None
        size = view_tokens(view)
        tokens = size - over
        while data is not None and tokens > 0:
            smaller = _view(unique[view.path], data, tokens, tokens)
            if smaller is None or not smaller.excerpts:
                return None
            if (cost := view_tokens(smaller)) < size:
                return smaller
            tokens -= cost - size + 1  # its chunks cost more than estimated: ask for less
        return None
    return cut


def with_sources(context: C, wanted: list[Wanted]) -> C:
    """Record what the context shows: each file (or each definition asked for in it), why, and for an excerpt
    which lines."""
    symbols = {w.path: w.symbols for w in wanted}
    sources = [ContextSource(path=v.path, symbol=s, why=v.why + _lines_shown(v)) for v in context.files
               for s in (symbols.get(v.path) or (None,))]
    return context.model_copy(update={"sources": sources})


def _lines_shown(view: FileView) -> str:
    """The lines an excerpt shows ("; lines 1-30, 112-170 of 483"); "" for a file shown whole or a new one."""
    if view.whole or not view.exists:
        return ""
    spans = [(e.start_line, e.start_line + e.text.count("\n") - e.text.endswith("\n")) for e in view.excerpts]
    return f"; lines {', '.join(f'{first}-{last}' for first, last in spans)} of {view.total_lines}"


MAX_SOURCE_CHARS = SourceFile.model_fields["content"].metadata[0].max_length
MAX_HITS = 40
HITS_SHARE = 3  # the search hits take at most a third of what the ticket leaves; the map the rest


def localize_fitted(context: LocalizeContext, index: RepoIndex, query: str, budget: int) -> LocalizeContext:
    """The localizer's context within `budget`: the search hits for the ticket's words (best first, up to a
    third of what the ticket leaves), then the repository map ranked towards the ticket in the rest. The map is
    sized by its own estimate; any overshoot of the JSON shrinks it (then the hits) until the whole fits."""
    left = budget - json_tokens(context.model_dump(mode="json"))
    hits, used = [], 0
    for hit in search(index, query, limit=MAX_HITS):
        view = SearchHitView(path=hit.path, symbol=hit.qualname, line=hit.line, signature=hit.signature,
                             matched=list(hit.matched_terms))
        cost = json_tokens(view.model_dump(mode="json"))
        if used + cost > left // HITS_SHARE:
            break
        hits.append(view)
        used += cost
    map_budget = max(left - used, 0)
    while True:
        shown = repo_map(index, map_budget, ticket=query)
        note = f"{len(shown.entries)} of {shown.candidates} ranked definitions and files shown; {index.files_note()}"
        context = context.model_copy(update={"repository_map": shown.text, "map_note": note, "search_hits": hits})
        over = json_tokens(context.model_dump(mode="json")) - budget
        if over <= 0 or not (map_budget or hits):
            break
        if map_budget:
            map_budget = max(map_budget - over - 1, 0)
        else:
            hits = hits[:-1]
    sources = [ContextSource(path=e.path, symbol=e.qualname, why="repository map: " + ("; ".join(e.reasons) or
                                                                                      "ranked by who uses it"))
               for e in shown.entries]
    sources += [ContextSource(path=h.path, symbol=h.symbol, why=f"search hit for {', '.join(h.matched)}")
                for h in hits]
    return context.model_copy(update={"sources": sources})


def index_facts(index: RepoIndex) -> dict:
    """What the localizer's answer is checked against: every file of the commit, and each parsed Python file's
    definitions."""
    symbols = {f.path: frozenset() for f in index.files if f.python and f.parsed}
    symbols.update({path: frozenset(s.qualname for s in found) for path, found in index.symbols_by_path.items()})
    return {"known_paths": index.paths, "known_symbols": symbols}


def review_fitted(context: RepoCodeReviewContext, root: Path, diff: str, changed: list[str], budget: int
                  ) -> RepoCodeReviewContext:
    """The reviewer's context within `budget`: the diff cut to whole lines, then each changed file whole while it
    fits; what is left out is listed, and the last files go (then more of the diff) until the JSON fits."""
    left = budget - json_tokens(context.model_dump(mode="json"))
    shown = fit_lines(diff, max(left * 2 // 3, 0))
    left -= json_tokens(shown)
    files, not_shown = [], []
    for path, data in read_files(root, changed).items():
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) and b"\0" not in data else None
        cost = json_tokens({"path": path, "content": text})
        if text is not None and cost <= left and len(text) <= MAX_SOURCE_CHARS:
            files.append(SourceFile(path=path, content=text))
            left -= cost
        else:
            not_shown.append(path)
    context = context.model_copy(update={"diff": shown, "diff_cut": shown != diff, "files": files,
                                         "not_shown": not_shown})
    context = held(context, budget)
    while context.diff and (over := json_tokens(context.model_dump(mode="json")) - budget) > 0:
        cut = fit_lines(context.diff, max(json_tokens(context.diff) - over - 1, 0))
        context = context.model_copy(update={"diff": cut, "diff_cut": True})
    paths = [line.partition(" b/")[2] for line in diff.splitlines() if line.startswith("diff --git a/")]
    sources = [ContextSource(path=f.path, why="changed by this requirement, shown whole") for f in context.files]
    sources += [ContextSource(path=p, why="in the diff from the merge base") for p in paths]
    return context.model_copy(update={"sources": sources})
