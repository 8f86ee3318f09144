"""Tech Architect and Tech Lead (design review, planning, code review): contexts and outputs."""
from __future__ import annotations

import posixpath
import re
from typing import ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from agents.schemas.base import Strict

# the text files a project's code and its tests are made of (an existing repository has templates and front-end
# files too); anything else (binaries, archives, lock files of other ecosystems) is not the team's to write
SAFE_PATH = re.compile(r"^(?!/)(?!.*\.\.)[A-Za-z0-9_./-]+\.(py|pyi|md|rst|toml|txt|cfg|ini|json|ya?ml|html|css|js|ts|"
                       r"sql|csv|jinja|j2|tmpl)$")


def safe_path(path: str) -> bool:
    """Relative, without '..', with a known extension, and in normal form: "./tests/acceptance/x.py" or
    "tests//acceptance/x.py" name the same file as "tests/acceptance/x.py", and every check by prefix (what
    the engineer may not write) must see that name."""
    return bool(SAFE_PATH.match(path)) and posixpath.normpath(path) == path


class FunctionalRequirement(Strict):
    """One checkable statement derived from an approved story: the architect's view of it."""

    id: str
    story: str
    statement: str
    acceptance: list[str]


class ArchitectContext(Strict):
    STABLE: ClassVar[tuple[str, ...]] = ("title", "summary", "constraints", "requirements")  # alike in each call: cached (ADR 38)

    title: str = ""
    summary: str
    constraints: list[str] = []
    requirements: list[FunctionalRequirement]
    review_notes: list[str] = []
    round: int = 1


class Component(Strict):
    name: str = Field(min_length=1, max_length=100)
    responsibility: str = Field(min_length=1, max_length=1000)


class DataModel(Strict):
    name: str = Field(min_length=1, max_length=100)
    fields: list[str] = Field(min_length=1)


class Interface(Strict):
    name: str = Field(min_length=1, max_length=200)
    signature: str = Field(min_length=1, max_length=500)
    description: str = Field(default="", max_length=1000)


class ADR(Strict):
    title: str = Field(min_length=3, max_length=200)
    context: str = Field(min_length=1, max_length=3000)
    decision: str = Field(min_length=1, max_length=3000)
    consequences: str = Field(min_length=1, max_length=3000)
    alternatives: list[str] = Field(min_length=1)


class TechnicalSpecOutput(Strict):
    """A technical specification with its architecture decision records."""

    reasoning: str = Field(min_length=1, max_length=4000)
    summary: str = Field(min_length=1, max_length=4000)
    components: list[Component] = Field(min_length=1)
    data_models: list[DataModel] = []
    interfaces: list[Interface] = Field(min_length=1)
    tech_stack: list[str] = Field(min_length=1)
    requirement_coverage: dict[str, list[str]] = Field(description="functional requirement id → component names")
    adrs: list[ADR] = Field(min_length=1, max_length=10)


class DesignReviewContext(Strict):
    STABLE: ClassVar[tuple[str, ...]] = ("requirements",)  # alike in each call: cached (ADR 38)

    requirements: list[FunctionalRequirement]
    spec: TechnicalSpecOutput
    round: int


class ReviewVerdict(Strict):
    """A tech lead's verdict: approve, or send back with concrete notes."""

    verdict: Literal["approve", "revise"]
    reasoning: str = Field(min_length=1, max_length=4000)
    notes: list[str] = []

    @model_validator(mode="after")
    def _notes_when_revising(self) -> ReviewVerdict:
        if self.verdict == "revise" and not self.notes:
            raise ValueError("a revise verdict needs at least one note")
        return self


class PlanContext(Strict):
    """What the planner sees of the spec: components, interfaces and stories, nothing else."""

    summary: str
    components: list[Component]
    interfaces: list[Interface]
    data_models: list[DataModel]
    stories: list[str]


class PlannedTask(Strict):
    key: str = Field(pattern=r"^T[0-9]{1,2}$")
    title: str = Field(min_length=3, max_length=200)
    story_refs: list[int] = Field(min_length=1)
    files: list[str] = Field(min_length=1)
    depends_on: list[str] = []
    definition_of_done: str = Field(min_length=1, max_length=2000)

    @field_validator("files")
    @classmethod
    def _safe_paths(cls, files: list[str]) -> list[str]:
        bad = [f for f in files if not safe_path(f)]
        if bad:
            raise ValueError(f"file paths must be relative, in normal form, without '..', with a known extension: "
                             f"{bad}")
        return files


class ImplementationPlanOutput(Strict):
    """Implementation tasks in dependency order; independent tasks can run in parallel."""

    reasoning: str = Field(min_length=1, max_length=4000)
    tasks: list[PlannedTask] = Field(min_length=1, max_length=12)

    @model_validator(mode="after")
    def _refs_exist(self, info: ValidationInfo) -> ImplementationPlanOutput:
        """Against the planner's context, when given: story_refs number its stories (a ticket's acceptance
        criteria), from 1; a reference past the last would leave the task without acceptance criteria."""
        count = _referable(info.context)
        bad = {t.key: [r for r in t.story_refs if not 0 < r <= count] for t in self.tasks} if count else {}
        bad = {key: refs for key, refs in bad.items() if refs}
        if bad:
            raise ValueError(f"story_refs must be between 1 and {count}: {bad}")
        return self

    @model_validator(mode="after")
    def _a_dag(self) -> ImplementationPlanOutput:
        keys = [t.key for t in self.tasks]
        if len(set(keys)) != len(keys):
            raise ValueError("task keys must be unique")
        seen: set[str] = set()
        for task in self.tasks:  # listed in dependency order: each dependency comes earlier
            unknown = [d for d in task.depends_on if d not in seen]
            if unknown:
                raise ValueError(f"{task.key} depends on {unknown}, which are not earlier tasks")
            seen.add(task.key)
        return self


def _referable(context: object) -> int:
    """How many items a plan's story_refs can name in `context` (0: not known, nothing is checked)."""
    stories = getattr(context, "stories", None)
    if stories is not None:
        return len(stories)
    ticket = getattr(context, "ticket", None)
    return len(ticket.acceptance_criteria) if ticket is not None else 0
