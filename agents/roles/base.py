"""An agent role is a pure function of its context and an LLM: no ORM, no side effects."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from agents.llm.client import LLM
from agents.prompts import framed, with_data_rule

C = TypeVar("C", bound=BaseModel)
Out = TypeVar("O", bound=BaseModel)


REST_OF_DATA = "Then the rest of its data, which changes between this job's calls."


def _json(data: dict) -> str:
    # indent=2 is also what the replay cassette matches `recorded_for` fields against
    return json.dumps(data, indent=2, ensure_ascii=False)


@dataclass(frozen=True)
class Agent(Generic[C, Out]):
    role: str
    output: type[Out]
    task: str  # one line that opens the user message
    prompt: str = ""  # prompt file name when one role has several jobs; defaults to the role

    @property
    def prompt_name(self) -> str:
        return self.prompt or self.role

    def messages(self, context: C) -> list[dict]:
        # every field of the context is untrusted (a brief, code, earlier answers): it goes in a data frame only.
        # The fields its type declares STABLE (the same in each of this job's calls for a requirement: its rounds,
        # tasks, attempts) come first, in a frame of their own, which the provider marks as a prefix for the API's
        # cache (ADR 38); the rest follows in a second frame.
        data = context.model_dump(mode="json")
        stable = {name: data[name] for name in getattr(context, "STABLE", ()) if name in data}
        rest = {name: value for name, value in data.items() if name not in stable}
        if not (stable and rest):
            return [{"role": "user", "content": framed(self.task, _json(data))}]
        return [{"role": "user", "content": f"{framed(self.task, _json(stable))}\n\n{framed(REST_OF_DATA, _json(rest))}"}]

    def run(self, context: C, llm: LLM) -> Out:
        # the context reaches the output's validators too: an answer that refers to what was not asked (a story
        # number past the last, a criterion id that does not exist) goes back to the model as a repair request
        return llm.generate(role=self.role, system=with_data_rule(llm.prompt(self.prompt_name)), messages=self.messages(context),
                            schema=self.output, validation_context=context)


@dataclass(frozen=True)
class AgentByContext:
    """One step, several jobs: the agent is chosen by the context's type (a brief or a bug ticket,
    a plan from a spec or from a ticket), so the step registry keeps one entry per step."""

    agents: dict[type[BaseModel], Agent]

    @property
    def role(self) -> str:
        (role,) = {agent.role for agent in self.agents.values()}  # one role per step, whatever the job
        return role

    def run(self, context: BaseModel, llm: LLM) -> BaseModel:
        # by the type or a base of it: a context carrying injected constraints is a subclass of its type
        agent = next((self.agents[t] for t in type(context).__mro__ if t in self.agents), None)
        if agent is None:
            raise TypeError(f"no {self.role} job takes a {type(context).__name__}")
        return agent.run(context, llm)
