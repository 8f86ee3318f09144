"""The assistant's inputs and answers (ADR 36): a question with its conversation, the supervisor's route, a
specialist's findings, the answer, and the summary earlier turns are folded into."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from agents.schemas.base import Strict

Specialist = Literal["status_reporter", "troubleshooter", "review_assistant", "code_guide"]
SPECIALISTS: tuple[str, ...] = ("status_reporter", "troubleshooter", "review_assistant", "code_guide")
MAX_SPECIALISTS = 2


class Turn(BaseModel):
    author: Literal["person", "assistant", "system"]
    text: str


class QuestionContext(BaseModel):
    """What every assistant call reads: the question, the conversation so far (its folded summary, then the
    turns after it), and what the conversation is about (a requirement's key, title and state; empty when it is
    about no one requirement)."""

    question: str
    summary: str = ""
    history: list[Turn] = Field(default_factory=list)
    about: dict[str, str] = Field(default_factory=dict)


class AnswerContext(QuestionContext):
    """The supervisor writing the answer: the question and what each specialist it chose found."""

    findings: dict[str, str] = Field(default_factory=dict)


class FoldContext(BaseModel):
    """The oldest turns to fold into the summary, and the summary so far."""

    summary: str = ""
    turns: list[Turn]


class RouteOutput(Strict):
    """Which specialists (one or two) look into the question, and why."""

    specialists: list[Specialist] = Field(min_length=1, max_length=MAX_SPECIALISTS)
    reason: str = Field(min_length=1, max_length=500)

    @field_validator("specialists")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("name each specialist once")
        return value


class FindingsOutput(Strict):
    """What the specialist found, with the facts the tools gave (names, states, numbers), for the supervisor."""

    findings: str = Field(min_length=1, max_length=4000)


class AnswerOutput(Strict):
    """The answer to the person, in plain prose; it says what was asked for approval, if anything."""

    answer: str = Field(min_length=1, max_length=6000)


class SummaryOutput(Strict):
    """The conversation's earlier turns in a few sentences: what was asked, what was answered, what was decided."""

    summary: str = Field(min_length=1, max_length=3000)
