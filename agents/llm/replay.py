"""Replay and recording on the provider side: answers without the network, and the record replays read.

Three pieces, none touching the ORM (agents/ is a leaf; the database side is lifecycle/replay/, ADR 21):

- The cassette (`ReplayProvider`): answers from a recorded cassette, and only what it recorded. A cassette is
  JSON: {"interactions": [{"role", "tool"?, "recorded_for": {field: value}, "match": [substrings], "tool_input",
  "model", "usage", "latency_ms"}]}, the usage counts named as in agents.llm.base.Usage.
  `recorded_for` ties an interaction to the run it was recorded from: the fields of its request's context (the
  JSON the roles send, agents/roles/base.py) that carried that run, with their exact values. The Product Owner's
  and the Business Analyst's requests carry the brief; later roles' carry the earlier answer they build on (the
  requirement's summary, the spec's interfaces, the plan's task). An interaction answers a request of its role
  (and forced tool, when given) only when the request holds every `recorded_for` field with that value and
  contains every `match` string; among those, the most specific `match` wins (a second round, a task key, a fix).
  A request none answers is a CassetteMissError naming the fix, never someone else's answer; an interaction
  with no `recorded_for` would answer any brief, so a cassette holding one is refused when it loads.
  Matching is stateless, so any worker process answers the same request the same way.
- A recorded run (`RecordedRunProvider`): unlike the cassette, matched by position: the n-th call a step makes
  gets the n-th call the source run's same step (key and attempt) made, provided role and tool agree. That is
  what a post-mortem needs: the same answers in the same order, including the source's repair rounds and model
  errors, whatever the prompts look like now. The caller (lifecycle/replay/recordings.py) loads the recording
  into plain `RecordedCall`s.
- The recording (`RecordingProvider`): wraps any provider so every call, answer or error, reaches a sink (the
  LLMCall table). A call the worker's soft time limit cut short is recorded too (its answer, and whether the API
  billed it, are unknown): the audit shows the attempt, and a replay of the run meets the same interruption at
  the same place.
"""
from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from agents.llm.base import (
    LLMConfigError,
    LLMError,
    LLMInvalidOutputError,
    LLMOutputTruncated,
    LLMRequest,
    LLMResponse,
    LLMTransientError,
    Provider,
    Usage,
)
from agents.llm.redact import redact

log = logging.getLogger(__name__)
USAGE_KEYS = tuple(f.name for f in fields(Usage))
SCALARS = (str, int, float, bool)


class CassetteMissError(LLMConfigError):
    """The cassette recorded no answer for this request: permanent (asking again gets the same), never retried."""


class ReplayProvider:
    name = "replay"

    def __init__(self, interactions: list[dict[str, Any]], *, latency_ms: int = 0, source: str = "the cassette") -> None:
        for interaction in interactions:
            _check_recorded_for(interaction)
        self.interactions = interactions
        self.latency_ms = latency_ms
        self.source = source

    @classmethod
    def from_file(cls, path: Path, *, latency_ms: int = 0) -> ReplayProvider:
        try:
            interactions = json.loads(Path(path).read_text(encoding="utf-8"))["interactions"]
            if not isinstance(interactions, list):
                raise TypeError("its interactions are not a list")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LLMConfigError(f"cannot read replay cassette {path} ({type(exc).__name__}: {exc}); point "
                                 "AITEAM_REPLAY_CASSETTE at a cassette file") from None
        return cls(interactions, latency_ms=latency_ms, source=f"the cassette {path}")

    def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.monotonic()
        found = self._match(request)
        tool_input, usage = _tool_input_of(found), _usage_of(found)
        if self.latency_ms:
            time.sleep(self.latency_ms / 1000)
        name = found.get("tool", request.tool.name)
        tool_use = {"type": "tool_use", "id": f"toolu_replay_{uuid.uuid4().hex[:12]}", "name": name,
                    "input": tool_input}
        return LLMResponse(
            tool_input=tool_input, content=[tool_use], model=found.get("model", request.model),
            usage=usage, stop_reason="tool_use", latency_ms=int((time.monotonic() - started) * 1000), tool_name=name,
        )

    def _match(self, request: LLMRequest) -> dict[str, Any]:
        text = "\n".join([request.system, *(_text_of(m["content"]) for m in request.messages)])
        candidates = [
            i for i in self.interactions
            if i["role"] == request.role and i.get("tool", request.tool.name) in request.tool_names
            and all(_field(key, value) in text for key, value in i["recorded_for"].items())
            and all(m in text for m in i.get("match", []))
        ]
        if not candidates:
            raise CassetteMissError(
                f"replay: {self.source} has no answer recorded for this {request.role} request (a cassette answers "
                "only the runs it recorded); set ANTHROPIC_API_KEY to have the model answer it, or point "
                "AITEAM_REPLAY_CASSETTE at a cassette recorded for it (aiteam_ticket: --cassette FILE; "
                "docs/cassettes.md)"
            )
        return max(candidates, key=lambda i: len(i.get("match", [])))


def _field(key: str, value: Any) -> str:
    """A context field as the roles render it (json.dumps, indent=2): `"key": value`, the value exact to its end."""
    return f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}"


def _check_recorded_for(interaction: dict[str, Any]) -> None:
    pins = interaction.get("recorded_for")
    if not (isinstance(pins, dict) and pins and all(
            isinstance(k, str) and isinstance(v, SCALARS) for k, v in pins.items())):
        raise LLMConfigError(
            f"replay: {_name(interaction)} has recorded_for {pins!r}; expected the context fields its request "
            "carried, e.g. {\"brief\": \"<the brief>\"} (without them it would answer any brief)")


def _tool_input_of(interaction: dict[str, Any]) -> dict[str, Any]:
    tool_input = interaction.get("tool_input")
    if not isinstance(tool_input, dict):
        raise LLMError(f"replay: {_name(interaction)} has no tool_input object to answer with")
    return tool_input


def _usage_of(interaction: dict[str, Any]) -> Usage:
    """The interaction's token counts, under this project's names (not the API's `cache_read_input_tokens`)."""
    usage = interaction.get("usage", {})
    counts_ok = isinstance(usage, dict) and set(usage) <= set(USAGE_KEYS) and all(
        isinstance(n, int) and n >= 0 for n in usage.values())
    if not counts_ok:
        raise LLMError(f"replay: {_name(interaction)} has usage {usage!r}; expected whole token counts "
                       f"under {', '.join(USAGE_KEYS)}")
    return Usage(**usage)


def _name(interaction: dict[str, Any]) -> str:
    """How an error names a cassette interaction: by what a reader finds it by in the file."""
    tool = f", tool {interaction['tool']!r}" if "tool" in interaction else ""
    match = interaction.get("match", [])
    return f"the cassette interaction for role {interaction.get('role')!r}{tool} matching {match!r}"


def _text_of(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text") or b.get("content") or json.dumps(b.get("input", ""))) for b in content)


# A recorded error replays as the same class (transient ones and the time limit are retried, the others fail the
# step).
ERRORS: dict[str, type[Exception]] = {cls.__name__: cls for cls in
                                      (LLMTransientError, LLMInvalidOutputError, LLMOutputTruncated, LLMConfigError,
                                       CassetteMissError, LLMError, SoftTimeLimitExceeded)}


class ReplayMissError(LLMError):
    """The replay asked for a call the recording does not have (or a different one): a permanent step failure."""


@dataclass(frozen=True)
class RecordedCall:
    role: str
    tool: str
    model: str
    content: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = ""
    usage: Usage = field(default_factory=Usage)
    error: str = ""  # "LLMTransientError: overloaded" when the recorded call failed

    @property
    def tool_input(self) -> dict[str, Any] | None:
        block = next((b for b in self.content if b.get("type") == "tool_use" and b.get("name") == self.tool), None)
        return block.get("input") if block else None


class RecordedRunProvider:
    """Answers one step's calls in order, starting after the calls this step already replayed (`start`),
    so a step that runs again (a retry, another worker) picks up where the recording does."""

    name = "replay"

    def __init__(self, calls: list[RecordedCall], *, step: str, start: int = 0) -> None:
        self.calls, self.step, self.position = calls, step, start

    def complete(self, request: LLMRequest) -> LLMResponse:
        number = self.position + 1
        call = self._expect(request, number)
        self.position = number
        if call.error:
            name, _, message = call.error.partition(": ")
            raise ERRORS.get(name, LLMError)(f"replayed from the recording: {message or name}")
        # The recorded blocks as they were (tool_use ids included), so repair turns echo them identically.
        return LLMResponse(tool_input=call.tool_input, content=call.content, model=call.model, usage=call.usage,
                           stop_reason=call.stop_reason)

    def _expect(self, request: LLMRequest, number: int) -> RecordedCall:
        if number > len(self.calls):
            raise ReplayMissError(
                f"replay: step {self.step} asks for model call #{number} ({request.role}, {request.tool.name}) but the "
                f"source run recorded {len(self.calls)} call(s) for that step"
            )
        call = self.calls[number - 1]
        if (call.role, call.tool) != (request.role, request.tool.name):
            raise ReplayMissError(
                f"replay: step {self.step} call #{number} asks {request.role}/{request.tool.name}, but the source "
                f"run recorded {call.role}/{call.tool} there"
            )
        return call


@dataclass(frozen=True)
class CallRecord:
    provider: str
    request: LLMRequest
    response: LLMResponse | None
    error: str
    latency_ms: int


class RecordingProvider:
    def __init__(self, inner: Provider, sink: Callable[[CallRecord], None]) -> None:
        self.inner, self.sink = inner, sink
        self.name = inner.name

    def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.monotonic()
        try:
            response = self.inner.complete(request)
        except LLMError as exc:
            self.sink(CallRecord(self.name, request, None, redact(f"{type(exc).__name__}: {exc}"), _since(started)))
            raise
        except SoftTimeLimitExceeded:
            took = _since(started)
            try:
                self.sink(CallRecord(self.name, request, None, f"{SoftTimeLimitExceeded.__name__}: the worker's time "
                                     f"limit ended the call after {took} ms; its answer and cost are unknown", took))
            except Exception:  # the limit must still end the task: recording it is second
                log.exception("could not record a model call cut short by the time limit")
            raise
        self.sink(CallRecord(self.name, request, response, "", response.latency_ms or _since(started)))
        return response


def _since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
