"""Anti-corruption translators: each role sees the upstream work in its own terms.

The architect gets functional requirements, not story prose; the planner gets the spec's
components and interfaces, not the architect's reasoning; an engineer gets one task, the
interfaces and the acceptance criteria of its stories. Pure functions of pydantic views.
"""
from __future__ import annotations

from agents.schemas import (
    AcceptanceCriterion,
    EngineerContext,
    FunctionalRequirement,
    Interface,
    PlanContext,
    PlannedTask,
    QCContext,
    SourceFile,
    StoryOut,
    TechnicalSpecOutput,
    Ticket,
)


def stories_to_requirements(stories: list[StoryOut]) -> list[FunctionalRequirement]:
    return [
        FunctionalRequirement(
            id=f"FR-{i}", story=story.title,
            statement=f"A {story.as_a} can {_lower_first(story.i_want)}, so that {_lower_first(story.so_that)}.",
            acceptance=story.acceptance_criteria,
        )
        for i, story in enumerate(stories, start=1)
    ]


def spec_to_plan_context(spec: TechnicalSpecOutput, stories: list[StoryOut]) -> PlanContext:
    return PlanContext(
        summary=spec.summary, components=spec.components, interfaces=spec.interfaces, data_models=spec.data_models,
        stories=[f"{i}. {s.title}" for i, s in enumerate(stories, start=1)],
    )


def task_to_engineer_context(
    task: PlannedTask, spec: TechnicalSpecOutput, stories: list[StoryOut], files: list[SourceFile], attempt: int
) -> EngineerContext:
    acceptance = [c for ref in task.story_refs if 0 < ref <= len(stories) for c in stories[ref - 1].acceptance_criteria]
    return EngineerContext(task=task, interfaces=spec.interfaces, acceptance=acceptance, existing_files=files,
                           attempt=attempt)


def stories_to_criteria(stories: list[StoryOut]) -> list[AcceptanceCriterion]:
    return [
        AcceptanceCriterion(id=f"AC-{i}.{j}", story=story.title, criterion=criterion)
        for i, story in enumerate(stories, start=1)
        for j, criterion in enumerate(story.acceptance_criteria, start=1)
    ]


def qc_context(stories: list[StoryOut], spec: TechnicalSpecOutput, files: list[SourceFile]) -> QCContext:
    """The criteria and interfaces, and the module layout — the engineer's tests are left out on purpose."""
    modules = [f.path for f in files if not _is_test(f.path)]
    return QCContext(criteria=stories_to_criteria(stories), interfaces=spec.interfaces, modules=modules)


def _is_test(path: str) -> bool:
    return path.startswith("tests/") or path.rsplit("/", 1)[-1].startswith("test_")


def _lower_first(text: str) -> str:
    text = text.strip().rstrip(".")
    for prefix in ("to ", "I want to ", "i want to "):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text[:1].lower() + text[1:]


# --- the bug_fix playbook: the ticket stands in for stories and spec -------------------
def ticket_task_to_engineer_context(
    task: PlannedTask, ticket: Ticket, interfaces: list[Interface], files: list[SourceFile], attempt: int
) -> EngineerContext:
    """story_refs of a ticket's plan name acceptance criteria by number."""
    criteria = ticket.acceptance_criteria
    acceptance = [criteria[ref - 1] for ref in task.story_refs if 0 < ref <= len(criteria)]
    return EngineerContext(task=task, interfaces=interfaces, acceptance=acceptance, existing_files=files,
                           attempt=attempt)


def ticket_to_criteria(ticket: Ticket) -> list[AcceptanceCriterion]:
    return [AcceptanceCriterion(id=f"AC-{i}", story=ticket.title or "the ticket", criterion=criterion)
            for i, criterion in enumerate(ticket.acceptance_criteria, start=1)]


def ticket_qc_context(ticket: Ticket, interfaces: list[Interface], files: list[SourceFile]) -> QCContext:
    """As for stories: the criteria, the interfaces (the plan's) and the module layout, never the engineer's tests."""
    modules = [f.path for f in files if not _is_test(f.path)]
    return QCContext(criteria=ticket_to_criteria(ticket), interfaces=interfaces, modules=modules)
