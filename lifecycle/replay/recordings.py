"""What a run recorded, read back as plain data for its replay.

Model calls come from the `LLMCall` rows of the source's same step (key and attempt), in the
order they were made. Sandbox reports and the delivery result come from the artifacts the
source's same step stored (`test_report` self_test / qc, `delivery`). A step that ran more
than once in the source (a retry) recorded several; the replay takes them in order, counting
what its own step already recorded.
"""
from __future__ import annotations

import json
from typing import Any

from agents.llm.base import Usage
from agents.llm.replay import RecordedCall, RecordedRunProvider, ReplayMissError
from lifecycle import step_keys
from lifecycle.models import Artifact, LLMCall
from lifecycle.services import leases
from lifecycle.states import ArtifactKind

# The artifact each non-LLM step stores its output in: (kind, name).
RECORDED_OUTPUT = {
    step_keys.REPO_PREPARE: (ArtifactKind.BASELINE, "baseline"),
    step_keys.SELF_TEST: (ArtifactKind.TEST_REPORT, "self_test"),
    step_keys.QC_RUN: (ArtifactKind.TEST_REPORT, "qc"),
    step_keys.DELIVER: (ArtifactKind.DELIVERY, "delivery"),
}


class RecordingMissing(Exception):
    """The source run has no recording for a step the replay reached."""


def recorded_calls(*, source_id, key: str, attempt: int) -> list[RecordedCall]:
    rows = LLMCall.objects.filter(requirement_id=source_id, step__key=key, step__attempt=attempt).order_by("id")
    return [_as_call(row) for row in rows]


def replay_provider(*, source_id, lease: leases.Lease) -> RecordedRunProvider:
    """The provider for one run of a replay's step: the source's calls, after those this step already replayed.
    A miss (a call the recording did not have) is recorded too, but answered nothing: it does not count, so a
    step run again after one (an operator's retry) starts where the recording does."""
    done = LLMCall.objects.filter(step_id=lease.step_id).exclude(error__startswith=f"{ReplayMissError.__name__}:").count()
    return RecordedRunProvider(recorded_calls(source_id=source_id, key=lease.key, attempt=lease.attempt),
                               step=f"{lease.key}#{lease.attempt}", start=done)


def recorded_output(*, source_id, lease: leases.Lease) -> dict[str, Any]:
    """The sandbox report (or delivery result) the source's same step produced, in the step's output shape."""
    kind, name = RECORDED_OUTPUT[lease.kind]
    done = Artifact.objects.filter(step_id=lease.step_id, kind=kind, name=name).count()
    found = list(Artifact.objects.filter(requirement_id=source_id, step__key=lease.key, step__attempt=lease.attempt,
                                         kind=kind, name=name).select_related("blob").order_by("version"))
    if done >= len(found):
        raise RecordingMissing(f"replay: step {lease.key}#{lease.attempt} needs recorded {kind} '{name}' #{done + 1} "
                               f"but the source run recorded {len(found)}")
    content = json.loads(found[done].blob.content)
    return _qc_output(content) if lease.kind == step_keys.QC_RUN else content


def _qc_output(stored: dict[str, Any]) -> dict[str, Any]:
    """The qc artifact is the report plus the lint findings and the gate's verdict; the step's output is
    the report and the lint (the gate is decided again by the service)."""
    report = {k: v for k, v in stored.items() if k not in ("lint", "gate")}
    return {"report": report, "lint": stored["lint"]}


def _as_call(row: LLMCall) -> RecordedCall:
    response = row.response or {}
    usage = Usage(input_tokens=row.input_tokens, output_tokens=row.output_tokens,
                  cache_read_tokens=row.cache_read_tokens, cache_creation_tokens=row.cache_creation_tokens)
    return RecordedCall(role=row.role, tool=row.tool_name, model=row.model, content=response.get("content") or [],
                        stop_reason=response.get("stop_reason", ""), usage=usage, error=row.error)
