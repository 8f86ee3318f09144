"""Senior Engineer on an existing repository: search/replace blocks for existing files, whole files for new ones.

Checked by shape here (paths, sizes, what the engineer may write); checked against the files as they stand when
the role's context can show them (`agents.edits.CurrentFiles`), so a block that does not apply is repaired.
"""
from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, ValidationInfo, model_validator

from agents.edits import check_answer, path_problem
from agents.schemas.base import Strict
from agents.schemas.engineering import LOADED_ON_THEIR_OWN, _shadows_runner, engineer_may_not_write

MAX_BLOCK_CHARS = 20_000
MAX_NEW_FILE_CHARS = 100_000  # as a whole file of a new project (SourceFile)


def _safe(path: str) -> str:
    why = path_problem(path)
    if why:
        raise ValueError(f"{path!r}: {why}")
    return path


RepoPath = Annotated[str, AfterValidator(_safe), Field(description="relative to the repository root, with '/'")]


class EditBlock(Strict):
    """Replace the lines `search` quotes with `replace`. `search` is whole lines copied exactly from the file as
    it stands after this answer's earlier blocks, with enough neighbouring lines to match exactly one place."""

    path: RepoPath
    search: str = Field(min_length=1, max_length=MAX_BLOCK_CHARS)
    replace: str = Field(max_length=MAX_BLOCK_CHARS, description="the new lines; empty removes the searched lines")


class NewFile(Strict):
    path: RepoPath
    content: str = Field(max_length=MAX_NEW_FILE_CHARS)


class EditsOutput(Strict):
    """Changes to an existing repository: search/replace blocks in `edits` for existing files, whole files in
    `files` only for new ones, and files to remove in `deleted`."""

    reasoning: str = Field(min_length=1, max_length=4000)
    edits: list[EditBlock] = Field(default=[], max_length=40)
    files: list[NewFile] = Field(default=[], max_length=20)
    deleted: list[RepoPath] = Field(default=[], max_length=20)

    @model_validator(mode="after")
    def _changes_what_it_may(self) -> EditsOutput:
        paths = [b.path for b in self.edits] + [f.path for f in self.files] + self.deleted
        if not paths:
            raise ValueError("an answer must change something: give at least one block, new file or deletion")
        # the same limits as whole-file answers: a ticket's text cannot widen what the engineer may write
        foreign = sorted({p for p in paths if engineer_may_not_write(p) or _shadows_runner(p)
                          or p.rsplit("/", 1)[-1] in LOADED_ON_THEIR_OWN})
        if foreign:
            raise ValueError(f"these belong to QC or DevOps (or could change how tests run): {foreign}")
        return self

    @model_validator(mode="after")
    def _planned_files_only(self, info: ValidationInfo) -> EditsOutput:
        """Against a plan task's context: the task writes its planned files and new files beside them (ADR 26)."""
        foreign = getattr(info.context, "foreign", None)
        paths = [b.path for b in self.edits] + [f.path for f in self.files] + self.deleted
        refused = foreign(list(dict.fromkeys(paths))) if callable(foreign) else []
        if refused:
            task = info.context.task
            raise ValueError(f"these files are not task {task.key}'s to write: {refused}; its files are {task.files} "
                             "(new files may go beside them); leave every other file as it is")
        return self

    @model_validator(mode="after")
    def _applies(self, info: ValidationInfo) -> EditsOutput:
        check_answer(self, info.context)  # EditsRefused (a ValueError) carries the repair request
        return self
