"""The check an output validator makes: the answer applied to the files as they stand, or a repair request."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from agents.edits.apply import Answer, Applied, Files, apply_edits, named_paths


@runtime_checkable
class CurrentFiles(Protocol):
    """A role's context that can show the repository as it stands. It reads only the paths asked for (with
    `read_files`), so a context stays small however large the repository is."""

    def current_files(self, paths: Sequence[str]) -> Files: ...


class EditsRefused(ValueError):
    """The answer does not apply. A ValueError, so pydantic makes it a validation error and the provider loop
    sends the message back to the model as its repair request."""

    def __init__(self, applied: Applied) -> None:
        super().__init__(applied.repair_request())
        self.applied = applied


def check_answer(answer: Answer, context: object) -> Applied | None:
    """The answer applied to the context's files; None when the context cannot show them (a check by shape
    alone, as every validator does without a context); EditsRefused when any block or file is refused."""
    if not isinstance(context, CurrentFiles):
        return None
    applied = apply_edits(context.current_files(named_paths(answer)), answer)
    if not applied.ok:
        raise EditsRefused(applied)
    return applied
