"""The Product Owner's triage of a ticket: what kind of work it asks for, or why the team will not do it.

The model names a kind only. Which playbook a kind runs is the lifecycle's table (lifecycle/playbooks.py,
TRIAGE_PLAYBOOKS), not a field of this answer: a ticket whose text talks the model into naming a playbook, a
budget or a deployment finds no field to put it in (extra fields are refused), so it can move the run to one of
the kinds below and no further.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agents.schemas.base import Strict

TicketKind = Literal["bug", "feature", "change", "question", "out_of_scope"]
# the kinds that end the run at triage: no playbook, no code
CLOSING_KINDS = ("question", "out_of_scope")


class TriageContext(Strict):
    """The ticket as it came in: all of it untrusted text (agents/roles/base.py frames it as data)."""

    title: str = ""
    body: str
    source: str = Field(default="", description="api, github, gitlab, jira or cli; empty for a replay")
    key: str = ""
    project: str = ""


class TriageOutput(Strict):
    kind: TicketKind
    reason: str = Field(min_length=1, max_length=2000,
                        description="why this kind; for out_of_scope the refusal the reporter will read")
    answer: str = Field(default="", max_length=8000, description="a question's answer, posted on the ticket")

    @model_validator(mode="after")
    def _answer_only_for_a_question(self) -> TriageOutput:
        if self.kind == "question" and not self.answer.strip():
            raise ValueError("a question needs its answer in `answer`: the reporter gets it as a comment")
        if self.kind != "question" and self.answer:
            raise ValueError(f"only a question has an answer; a {self.kind} ticket leaves `answer` empty")
        return self
