"""What a role sees of an existing repository (docs/adr/0035): files as they stand, whole or in excerpts cut to the
role's token budget, and the record of what went into its context and why.

Two fields of a repository context never reach the model (`exclude=True`, so `model_dump` leaves them out):
`sources`, copied onto the step's LLMCall rows, and `workspace`, the checkout the answer is checked against
(`agents.edits.CurrentFiles`), so a search/replace block that does not apply goes back to the model.
"""
from __future__ import annotations

import posixpath
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from agents.edits import Files, read_files
from agents.schemas.base import Strict
from agents.schemas.design import Interface, PlannedTask
from agents.schemas.engineering import CodeReviewContext
from agents.schemas.quality import QCContext
from agents.schemas.tickets import Ticket


class ContextSource(Strict):
    """One file (or definition) a context carried, and why it was chosen."""

    path: str
    symbol: str | None = None
    why: str


class Excerpt(Strict):
    start_line: int = Field(description="the line number of the excerpt's first line, from 1")
    text: str = Field(description="whole lines exactly as the file has them")


class FileView(Strict):
    """A file as it stands now: whole, or the excerpts that fit the budget (`whole` false)."""

    path: str
    why: str
    exists: bool = True  # False: a new file the plan names; it has no text yet
    total_lines: int = 0
    whole: bool = True
    excerpts: list[Excerpt] = []


class RepositoryContext(Strict):
    """The two fields every repository context carries apart from what the model reads."""

    workspace: str = Field(default="", exclude=True)
    sources: list[ContextSource] = Field(default=[], exclude=True)

    def current_files(self, paths: Sequence[str]) -> Files:
        """The files as they stand in the workspace (agents.edits.CurrentFiles): an answer's blocks are checked
        against them while it is validated."""
        return read_files(Path(self.workspace), paths) if self.workspace else {}


class RepoEngineerContext(RepositoryContext):
    """One plan task on an existing repository: the engineer answers with search/replace blocks (EditsOutput)."""

    task: PlannedTask
    ticket: Ticket
    acceptance: list[str]
    interfaces: list[Interface] = []
    files: list[FileView]
    not_shown: list[str] = Field(default=[], description="files of the task or the localization left out to keep "
                                 "within the budget")
    planned_elsewhere: list[str] = []
    attempt: int = 1

    def foreign(self, paths: list[str]) -> list[str]:
        """Which of `paths` this task may not write: any file of the repository that is not one of the task's, or a
        new file outside the folders of its planned files (docs/adr/0026: a task writes only its planned files)."""
        own = set(self.task.files)
        folders = {posixpath.dirname(f) for f in own}
        existing = set(self.current_files([p for p in paths if p not in own]))
        return [p for p in paths if p not in own and (p in set(self.planned_elsewhere) or p in existing
                                                      or posixpath.dirname(p) not in folders)]


class RepoFixContext(RepositoryContext):
    """A fix on an existing repository: what failed or what the reviewers said, and the files as they stand."""

    attempt: int
    ticket: Ticket
    files: list[FileView]
    not_shown: list[str] = []
    failing_tests: list[str] = []
    output_tail: str = ""
    review_notes: list[str] = []
    guidance: list[str] = []


class RepoCodeReviewContext(CodeReviewContext, RepositoryContext):
    """A review on an existing repository: the change as git's diff from the merge base, and the changed files
    whole where they fit the budget (the rest in `not_shown`; the diff shows what changed in them)."""

    diff: str = Field(description="the change from the merge base (unified diff), cut to whole lines to fit")
    diff_cut: bool = False
    not_shown: list[str] = []


class BaselineFacts(Strict):
    """The repository's tests at the base commit, as the preparation ran them twice (before any change)."""

    test_command: str
    counts: dict[str, int]
    failing: list[str] = Field(default=[], description="tests that failed in both base runs (the first ones)")
    failing_total: int = 0
    flaky: list[str] = Field(default=[], description="tests whose outcome differed between the two base runs")


class RepoQCContext(QCContext, RepositoryContext):
    """QC on an existing repository: the ticket, the changed code (never the engineer's tests) as it stands, whole or
    in excerpts cut to QC's budget, and the tests at the base commit."""

    ticket: Ticket
    files: list[FileView] = []
    not_shown: list[str] = []
    baseline: BaselineFacts | None = None
    reproduce: bool = Field(default=False, description="a bug: each of your tests must fail at the base commit "
                            "(it shows the bug) and pass after the change")
