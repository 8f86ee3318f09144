"""Bug fix playbook: the ticket the Product Owner clarifies, and the Tech Lead's plan from it.

A bug fix has no user stories and no technical spec. The clarified ticket carries the
acceptance criteria (the expected behaviour); the Tech Lead's plan names the interfaces the
fix touches and the tech stack, which the spec would otherwise have given the engineer,
QC and DevOps.
"""
from __future__ import annotations

from pydantic import Field, model_validator

from agents.schemas.base import Strict
from agents.schemas.design import ImplementationPlanOutput, Interface
from agents.schemas.product import ProductOwnerContext, ProductOwnerOutput


class BugTicketContext(ProductOwnerContext):
    """The same inputs as a brief's; its type tells the Product Owner that the brief is a bug ticket."""


class BugTicketOutput(ProductOwnerOutput):
    """A clarified ticket must state the expected behaviour as acceptance criteria."""

    @model_validator(mode="after")
    def _expected_behaviour(self) -> BugTicketOutput:
        if self.verdict == "clear" and not self.acceptance_criteria:
            raise ValueError("a clear bug ticket needs acceptance criteria: the expected behaviour, each checkable")
        return self


class Ticket(Strict):
    """The clarified ticket as the Tech Lead, engineer, reviewer and QC see it."""

    title: str = ""
    summary: str
    objectives: list[str] = []
    constraints: list[str] = []
    acceptance_criteria: list[str] = Field(min_length=1)


class TicketPlanContext(Strict):
    """What the planner sees of a bug fix: the ticket; tasks refer to its acceptance criteria by number (from 1)."""

    ticket: Ticket


class TicketPlanOutput(ImplementationPlanOutput):
    """Tasks as for a spec (story_refs name acceptance criteria by number), plus what a spec would have said."""

    interfaces: list[Interface] = Field(min_length=1, description="the public interfaces the fix touches or adds")
    tech_stack: list[str] = Field(min_length=1)
