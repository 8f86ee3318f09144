"""The assistant (ADR 36): a supervisor with no tools routes a question to at most two specialists, each with its
own prompt and tools, then writes one answer from their findings; it also folds a long conversation's oldest
turns into a summary. Pure functions of their context and an LLM, as every role: the tools come in as callables
(agents.llm.tool_use.Tool) that the caller built for the asker, so nothing here decides what anyone may do."""
from __future__ import annotations

import json
from collections.abc import Sequence

from agents.llm.client import LLM
from agents.llm.tool_use import Tool, ToolUse
from agents.prompts import framed, with_data_rule
from agents.roles.base import Agent
from agents.schemas.conversation import (
    AnswerContext,
    AnswerOutput,
    FindingsOutput,
    FoldContext,
    QuestionContext,
    RouteOutput,
    SummaryOutput,
)

SUPERVISOR = "supervisor"
MAX_TOOL_TURNS = 6

ROUTER = Agent(role=SUPERVISOR, output=RouteOutput, prompt="assistant_route",
               task="Choose the specialists who will look into the person's question.")
ANSWERER = Agent(role=SUPERVISOR, output=AnswerOutput, prompt="assistant_answer",
                 task="Answer the person's question from the specialists' findings.")
FOLDER = Agent(role=SUPERVISOR, output=SummaryOutput, prompt="assistant_fold",
               task="Fold these earlier turns of the conversation into the summary.")


def route(context: QuestionContext, llm: LLM) -> RouteOutput:
    return ROUTER.run(context, llm)


def answer(context: AnswerContext, llm: LLM) -> AnswerOutput:
    return ANSWERER.run(context, llm)


def fold(context: FoldContext, llm: LLM) -> SummaryOutput:
    return FOLDER.run(context, llm)


def investigate(specialist: str, context: QuestionContext, tools: Sequence[Tool],
                llm: LLM) -> tuple[FindingsOutput, list[ToolUse]]:
    """One specialist's turns: it calls its tools (each result comes back as data) and ends with its findings."""
    body = json.dumps(context.model_dump(mode="json"), indent=2, ensure_ascii=False)
    messages = [{"role": "user", "content": framed("Look into the person's question with your tools, then submit "
                                                   "your findings.", body)}]
    return llm.converse(role=specialist, system=with_data_rule(llm.prompt(f"assistant_{specialist}")),
                        messages=messages, tools=tools, finish=FindingsOutput, max_turns=MAX_TOOL_TURNS)
