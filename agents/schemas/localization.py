"""The Tech Lead's localization on an existing repository (docs/adr/0035): from the clarified ticket, the ranked
repository map and the lexical search hits, the files and definitions to change or read, each with a reason.

The answer is checked against the repository's index at the commit the context was built from: a path that is
not a file there (unless marked new) or a definition its file does not have goes back to the model as a repair.
"""
from __future__ import annotations

import difflib
from typing import Literal

from pydantic import Field, ValidationInfo, model_validator

from agents.schemas.base import Strict
from agents.schemas.design import PlanContext
from agents.schemas.edits import RepoPath
from agents.schemas.repository import FileView, RepositoryContext
from agents.schemas.tickets import Ticket, TicketPlanContext

MAX_SUGGESTIONS = 3
MAX_SYMBOLS_LISTED = 30


class SearchHitView(Strict):
    path: str
    symbol: str
    line: int
    signature: str
    matched: list[str] = Field(description="the words of the ticket this definition matched")


class LocalizeContext(RepositoryContext):
    ticket: Ticket
    repository_map: str = Field(description="the best-ranked definitions by file, with line numbers")
    map_note: str = ""
    search_hits: list[SearchHitView] = []
    known_paths: frozenset[str] = Field(default=frozenset(), exclude=True)  # every file of the commit
    known_symbols: dict[str, frozenset[str]] = Field(default={}, exclude=True)  # a parsed Python file's qualnames


class LocatedFile(Strict):
    path: RepoPath
    action: Literal["change", "read", "new"] = Field(
        description="change: an existing file to edit; read: context the change depends on; new: a file to create")
    symbols: list[str] = Field(default=[], max_length=20,
                               description="qualified names (Class.method) in this file that matter; Python only")
    reason: str = Field(min_length=1, max_length=500)


class LocalizationOutput(Strict):
    """Where the change goes: few files, each with why."""

    reasoning: str = Field(min_length=1, max_length=4000)
    files: list[LocatedFile] = Field(min_length=1, max_length=25)

    @model_validator(mode="after")
    def _a_change(self) -> LocalizationOutput:
        paths = [f.path for f in self.files]
        if len(set(paths)) != len(paths):
            raise ValueError("name each file once")
        if not any(f.action in ("change", "new") for f in self.files):
            raise ValueError("name at least one file to change or create")
        return self

    @model_validator(mode="after")
    def _in_the_repository(self, info: ValidationInfo) -> LocalizationOutput:
        """Against the index the context was built from: the files exist (a new one does not yet), and the
        definitions named are in their files."""
        context = info.context
        if not isinstance(context, LocalizeContext) or not context.known_paths:
            return self
        problems = [problem for f in self.files if (problem := _problem(f, context))]
        if problems:
            raise ValueError(" ".join(problems))
        return self


def _problem(located: LocatedFile, context: LocalizeContext) -> str:
    exists = located.path in context.known_paths
    if located.action == "new":
        return f"{located.path} already exists: mark it change or read, not new." if exists else ""
    if not exists:
        near = difflib.get_close_matches(located.path, context.known_paths, n=MAX_SUGGESTIONS, cutoff=0.6)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        return (f"{located.path} is not a file of the repository{hint}; name files from the map or the search hits, "
                "or mark a file to create as new.")
    defined = context.known_symbols.get(located.path)
    if located.symbols and defined is None:
        return f"{located.path}: symbols are named only for Python files the index parsed; leave them out."
    unknown = [s for s in located.symbols if s not in (defined or ())]
    if unknown:
        listed = sorted(defined)[:MAX_SYMBOLS_LISTED]
        return (f"{located.path} defines no {', '.join(unknown)}; its definitions are {', '.join(listed)}"
                f"{' and more' if len(defined) > len(listed) else ''}.")
    return ""


class RepoTicketPlanContext(TicketPlanContext, RepositoryContext):
    """A ticket's plan on an existing repository: the ticket, and the Tech Lead's localization with the files'
    current text (budgeted). Planned by the same job as a bug ticket (its type is a TicketPlanContext)."""

    localization: list[LocatedFile]
    files: list[FileView] = []
    not_shown: list[str] = []


class RepoPlanContext(PlanContext, RepositoryContext):
    """A spec's plan on an existing repository (a brief with stories): the spec's view, and the localization with
    the files' current text (budgeted)."""

    localization: list[LocatedFile]
    files: list[FileView] = []
    not_shown: list[str] = []
