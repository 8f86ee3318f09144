"""Constraints reviewers injected at the budget gate, added to any agent's context.

Every context type gets the same extra field, `human_constraints`, through a subclass made once per
type; with no constraint the context (and so the message and its replay match) is unchanged.
"""
from __future__ import annotations

from functools import cache
from typing import TypeVar

from pydantic import BaseModel, Field, create_model

C = TypeVar("C", bound=BaseModel)
FIELD = "human_constraints"


@cache
def _constrained(context_type: type[BaseModel]) -> type[BaseModel]:
    return create_model(
        context_type.__name__, __base__=context_type,
        human_constraints=(list[str], Field(description="constraints a human reviewer added; follow every one")),
    )


def with_constraints(context: C, constraints: list[str] | tuple[str, ...]) -> C:
    if not constraints:
        return context
    return _constrained(type(context))(**dict(context), human_constraints=list(constraints))
