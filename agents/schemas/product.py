"""Product Owner and Business Analyst: their contexts and outputs."""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from agents.schemas.base import Strict


# --- Product Owner ---------------------------------------------------------------------
class Clarification(Strict):
    questions: list[str]
    answer: str


class ProductOwnerContext(Strict):
    STABLE: ClassVar[tuple[str, ...]] = ("title", "brief", "project")  # alike in each call: cached (ADR 38)

    title: str = ""
    brief: str
    project: str = ""
    clarifications: list[Clarification] = []


class ProductOwnerOutput(Strict):
    """The clarified requirement, or the questions that must be answered before one can be written."""

    verdict: Literal["clear", "too_vague"]
    reasoning: str = Field(min_length=1, max_length=4000)
    summary: str = Field(default="", max_length=4000)
    objectives: list[str] = []
    out_of_scope: list[str] = []
    assumptions: list[str] = []
    constraints: list[str] = []
    success_metrics: list[str] = []
    acceptance_criteria: list[str] = Field(default=[], max_length=12,
                                           description="checkable expected behaviours; required for a bug ticket")
    clarifying_questions: list[str] = Field(default=[], max_length=10)

    @model_validator(mode="after")
    def _consistent(self) -> ProductOwnerOutput:
        if self.verdict == "clear" and not (self.summary and self.objectives):
            raise ValueError("a clear brief needs a summary and at least one objective")
        if self.verdict == "too_vague" and not self.clarifying_questions:
            raise ValueError("a too_vague verdict needs at least one clarifying question")
        return self


# --- Business Analyst ------------------------------------------------------------------
class RequirementDocView(Strict):
    summary: str
    objectives: list[str]
    out_of_scope: list[str] = []
    assumptions: list[str] = []
    constraints: list[str] = []
    success_metrics: list[str] = []


class StoryFeedback(Strict):
    round: int
    decision: str
    text: str
    story_titles: list[str] = []


class BusinessAnalystContext(Strict):
    STABLE: ClassVar[tuple[str, ...]] = ("title", "brief", "doc")  # alike in each call: cached (ADR 38)

    title: str = ""
    brief: str
    doc: RequirementDocView
    round: int = 1
    feedback: list[StoryFeedback] = []


class StoryOut(Strict):
    title: str = Field(min_length=3, max_length=200)
    as_a: str = Field(min_length=1, max_length=300)
    i_want: str = Field(min_length=1, max_length=2000)
    so_that: str = Field(min_length=1, max_length=2000)
    acceptance_criteria: list[str] = Field(min_length=1, max_length=12)
    priority: Literal["must", "should", "could", "wont"]
    story_points: Literal[1, 2, 3, 5, 8, 13]


class BusinessAnalystOutput(Strict):
    """User stories with testable acceptance criteria, covering every objective."""

    reasoning: str = Field(min_length=1, max_length=4000)
    stories: list[StoryOut] = Field(min_length=1, max_length=20)
