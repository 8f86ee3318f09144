"""Compare a replay with its source: transition sequences, artifact hashes and (for information) model requests.

- Transitions: every audit row of the requirement, its stories and its review tasks, in the
  order written, as (subject, event, from, to); no ids, actors or timestamps. A review task is
  named by its kind. Its bookkeeping events (claim, unclaim, assign, hand_to_group, remind,
  escalate: who held it and when the SLA acted) are left out, because they record people's
  and the clock's timing rather than the flow, and its pending states (open, claimed,
  escalated) compare as "pending".
- Artifacts: (kind, name, version, sha256 of the content) of every artifact except the PM's
  status digest, which is computed from the clock (time in state) and is not an output of the run.
- Requests: whether each replayed model call was asked with the same system prompt and
  messages as the recorded one. Informational: answers are matched by position, so a changed
  prompt does not change the replay, but it tells a post-mortem that today's code asks differently.
"""
from __future__ import annotations

import hashlib
import json
from itertools import zip_longest
from typing import Any

from lifecycle.models import Requirement
from lifecycle.states import PENDING_REVIEW_STATES, ArtifactKind

BOOKKEEPING_EVENTS = {"claim", "unclaim", "assign", "hand_to_group", "remind", "escalate"}
NOT_COMPARED_KINDS = {ArtifactKind.STATUS_DIGEST}
PENDING = {str(s) for s in PENDING_REVIEW_STATES}
SHOWN_DIFFERENCES = 20


def transition_sequence(requirement: Requirement) -> list[list[str]]:
    kinds = {str(pk): kind for pk, kind in requirement.review_tasks.values_list("pk", "kind")}
    sequence = []
    for subject, subject_id, event, before, after in requirement.transitions.order_by("id").values_list(
            "subject", "subject_id", "event", "from_state", "to_state"):
        if subject == "review_task":
            if event in BOOKKEEPING_EVENTS:
                continue
            subject, before = f"review_task:{kinds.get(subject_id, '?')}", "pending" if before in PENDING else before
        sequence.append([subject, event, before, after])
    return sequence


def artifact_hashes(requirement: Requirement) -> list[list[Any]]:
    rows = requirement.artifacts.exclude(kind__in=NOT_COMPARED_KINDS).order_by("kind", "name", "version")
    return [[kind, name, version, sha] for kind, name, version, sha in rows.values_list("kind", "name", "version", "blob_id")]


def request_fingerprints(requirement: Requirement) -> dict[str, list[str]]:
    """step key#attempt → one fingerprint per model call, in order."""
    calls: dict[str, list[str]] = {}
    for key, attempt, system_sha, messages in requirement.llm_calls.order_by("id").values_list(
            "step__key", "step__attempt", "system_sha256", "messages"):
        digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
        calls.setdefault(f"{key}#{attempt}", []).append(f"{system_sha[:12]}/{digest[:12]}")
    return calls


def compare(source: Requirement, replay: Requirement) -> dict[str, Any]:
    transitions = _compare_transitions(transition_sequence(source), transition_sequence(replay))
    artifacts = _compare_artifacts(artifact_hashes(source), artifact_hashes(replay))
    requests = _compare_requests(request_fingerprints(source), request_fingerprints(replay))
    return {
        "matched": transitions["equal"] and artifacts["equal"], "source": str(source.pk), "replay": str(replay.pk),
        "source_state": source.state, "replay_state": replay.state, "transitions": transitions,
        "artifacts": artifacts, "requests": requests, "replay_errors": _step_errors(replay),
    }


def _compare_transitions(source: list[list[str]], replay: list[list[str]]) -> dict[str, Any]:
    first = next((i for i, (a, b) in enumerate(zip_longest(source, replay)) if a != b), None)
    return {"equal": first is None, "source": source, "replay": replay, "first_difference": first}


def _compare_artifacts(source: list[list[Any]], replay: list[list[Any]]) -> dict[str, Any]:
    theirs = {tuple(row[:3]): row[3] for row in source}
    ours = {tuple(row[:3]): row[3] for row in replay}
    changed = [list(key) for key in theirs if key in ours and theirs[key] != ours[key]]
    missing = [list(key) for key in theirs if key not in ours]
    extra = [list(key) for key in ours if key not in theirs]
    return {"equal": not (changed or missing or extra), "source": source, "replay": replay,
            "changed": changed[:SHOWN_DIFFERENCES], "missing": missing[:SHOWN_DIFFERENCES],
            "extra": extra[:SHOWN_DIFFERENCES]}


def _compare_requests(source: dict[str, list[str]], replay: dict[str, list[str]]) -> dict[str, Any]:
    differing = [step for step in replay if replay[step] != source.get(step, [])[:len(replay[step])]]
    return {"compared": sum(len(calls) for calls in replay.values()), "differing_steps": differing[:SHOWN_DIFFERENCES]}


def _step_errors(replay: Requirement) -> list[str]:
    return [f"{key}#{attempt}: {error}" for key, attempt, error in
            replay.steps.exclude(error="").order_by("id").values_list("key", "attempt", "error")[:SHOWN_DIFFERENCES]]


def describe(result: dict[str, Any]) -> list[str]:
    """What differs, one line each (empty when the replay matched)."""
    lines = []
    transitions, artifacts = result["transitions"], result["artifacts"]
    if not transitions["equal"]:
        at = transitions["first_difference"]
        theirs, ours = (_at(transitions[side], at) for side in ("source", "replay"))
        lines.append(f"transition #{at + 1} differs: source {theirs}, replay {ours}")
    for what in ("changed", "missing", "extra"):
        lines += [f"artifact {what}: {kind} {name} v{version}" for kind, name, version in artifacts[what]]
    if lines:  # why it went elsewhere, when it did
        lines += [f"replay step error: {error}" for error in result["replay_errors"]]
    return lines


def _at(sequence: list[list[str]], index: int) -> str:
    return " ".join(sequence[index]) if index < len(sequence) else "(nothing)"
