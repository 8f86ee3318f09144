"""Replay a finished or failed run from its recordings, for post-mortems.

A replay is a new Requirement (`replay_of` = the source) in the source's project, with its
brief, title, playbook and frozen prompt bundle. Its steps run through the ordinary
services; only what came from outside is answered from the source's recording: model calls
(`LLMCall`), sandbox reports and the delivery result (their artifacts), see
lifecycle/replay/recordings.py. Human gates are decided by the logged `replay` policy with the
decision the source's gate of the same kind and round got; a gate the source never decided
is held (not swept, nobody notified), where the source stopped too. When the replay comes
to rest, its transitions and artifact hashes are compared with the source's (lifecycle/replay/compare.py).
"""
from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from lifecycle import step_keys
from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import Membership, Replay, Requirement, ReviewTask, StateTransition, Step
from lifecycle.replay import compare as comparing
from lifecycle.services import scheduling
from lifecycle.services.decisions import review_decide
from lifecycle.services.outbox import emit
from lifecycle.services.reviews import REQUIRED_TEXT
from lifecycle.states import SUBMITTING_ROLES, TERMINAL_STATES, RequirementState, ReviewKind, ReviewState, StepState

log = logging.getLogger("aiteam.progress")
REPLAY = Actor.policy("replay")
BUSY_STEPS = (StepState.QUEUED, StepState.RUNNING)


def replay_start(*, source_id: Any, user: Any = None, via: str = "cli") -> Requirement:
    """Create the replay of a run that has come to rest and start it (queued on commit).

    `user` None is the operator (the CLI); a user needs the submitter or admin role in the source's organization.
    """
    source = Requirement.objects.select_related("project").get(pk=source_id)
    if user is not None and not Membership.objects.filter(
            user=user, organization_id=source.organization_id, role__in=SUBMITTING_ROLES).exists():
        raise NotPermitted(f"{user} may not replay requirements of {source.project} (needs the submitter or admin role)")
    if not (source.state in TERMINAL_STATES and run_at_rest(source) or replay_settled(source)):
        raise IllegalTransition(f"requirement {source.pk} is still running ({source.state}, steps queued or running): "
                                "only a finished or failed run can be replayed")
    with transaction.atomic():
        # one request at a time per source: a client's retry, or a second click, finds the first replay running
        Requirement.objects.select_for_update().filter(pk=source.pk).values_list("pk").get()
        if Replay.objects.filter(requirement__replay_of=source, verdict=Replay.Verdict.RUNNING).exists():
            raise IllegalTransition(f"a replay of requirement {source.pk} is still running: wait for its comparison")
        first_step, playbook = _start_of(source)
        replay = Requirement.objects.create(
            organization_id=source.organization_id, project=source.project, title=source.title, brief=source.brief,
            playbook=playbook, prompt_bundle_id=source.prompt_bundle_id, run_settings=source.run_settings,
            submitted_by=user, replay_of=source,
        )
        Replay.objects.create(requirement=replay, requested_by=user, via=via)
        StateTransition.objects.create(
            requirement=replay, subject="requirement", subject_id=str(replay.pk), event="submit", from_state="",
            to_state=RequirementState.RECEIVED, actor_role=REPLAY.role, actor_user=user, via=via,
            metadata={"replay_of": str(source.pk)},
        )
        emit(replay, "RequirementReceived", {"round": replay.clarification_round})
        scheduling.step_schedule(requirement_id=replay.pk, key=first_step, attempt=replay.clarification_round)
    log.info("replay %s of %s started (%s)", replay.pk, source.pk, via)
    return replay


def _start_of(source: Requirement) -> tuple[str, str]:
    """The first step and the playbook the source started with: a triaged ticket starts at its triage, with the
    playbook it had before the triage chose one (its audit row says which), so the replay triages it again."""
    if not source.steps.filter(key=step_keys.PO_TRIAGE).exists():
        prepared = source.steps.filter(key=step_keys.REPO_PREPARE).exists()
        return step_keys.first_step(ticket=False, repository=prepared), source.playbook
    triage = source.transitions.filter(subject="triage").order_by("id").first()
    return step_keys.PO_TRIAGE, triage.from_state if triage else source.playbook


def run_at_rest(requirement: Requirement) -> bool:
    """Nothing of it is queued or running: it finished, failed, or waits for a human."""
    return not Step.objects.filter(requirement=requirement, state__in=BUSY_STEPS).exists()


def replay_settled(requirement: Requirement) -> bool:
    """At rest, and every event it emitted relayed (nothing more will be scheduled by itself)."""
    return run_at_rest(requirement) and not requirement.events.filter(sent_at=None).exists()


def replay_review_answer(task: ReviewTask) -> bool:
    """The `replay` policy: decide a replay's gate as the source's same gate was decided. Returns whether it
    decided; a gate without a recorded decision (or whose decision no longer applies) is held."""
    recorded = _recorded_decision(task)
    if recorded is None:
        _hold(task, "the source run has no decision for this gate")
        return False
    who = recorded.decided_by.get_username() if recorded.decided_by else recorded.decided_by_policy
    log.info("replay: deciding %s as recorded: %s by %s", task, recorded.decision, who)
    try:
        review_decide(task_id=task.pk, actor=REPLAY, decision=recorded.decision, **_recorded_inputs(recorded),
                      origin={"replayed_task": str(recorded.pk), "decided_by": who, "via": recorded.decided_via})
    except (DomainError, IllegalTransition) as exc:
        _hold(task, f"the recorded decision no longer applies: {exc}")
        return False
    return True


def replays_sweep(limit: int = 100) -> int:
    """Compare replays still marked running that have come to rest by a path no event announces (a skipped or
    failed step, a cancel while steps were queued); returns how many were compared."""
    running = Replay.objects.filter(verdict=Replay.Verdict.RUNNING).select_related("requirement")[:limit]
    settled = [run.requirement for run in running if replay_settled(run.requirement)]
    for requirement in settled:
        replay_compare(requirement)
    return len(settled)


def replay_compare(requirement: Requirement) -> Replay:
    """Compare a replay with its source now and store the result (matched only once it is at rest)."""
    run = Replay.objects.select_related("requirement__replay_of").get(requirement=requirement)
    result = comparing.compare(run.requirement.replay_of, run.requirement)
    if not run_at_rest(run.requirement):
        run.verdict = Replay.Verdict.RUNNING
    else:
        run.verdict = Replay.Verdict.MATCHED if result["matched"] else Replay.Verdict.DIFFERS
    run.comparison, run.compared_at = result, timezone.now()
    run.save(update_fields=["verdict", "comparison", "compared_at"])
    log.info("replay %s of %s: %s", requirement.pk, run.requirement.replay_of_id, run.verdict)
    return run


def _recorded_decision(task: ReviewTask) -> ReviewTask | None:
    source_id = Requirement.objects.values_list("replay_of_id", flat=True).get(pk=task.requirement_id)
    recorded = ReviewTask.objects.select_related("decided_by").filter(
        requirement_id=source_id, kind=task.kind, round=task.round, state=ReviewState.RESOLVED).first()
    if recorded is not None and task.kind == ReviewKind.STEP_FAILED and _failed_step(recorded) != _failed_step(task):
        return None  # the replay failed somewhere else than the source did
    return recorded


def _recorded_inputs(recorded: ReviewTask) -> dict[str, Any]:
    """What the decider typed, under the argument review_decide took it as: `feedback` holds the feedback, the
    answer or the constraint (whichever the decision needs), `decision_data` the structured input (budgets)."""
    text = REQUIRED_TEXT.get(recorded.decision)
    inputs = {"reason": recorded.reason, (text if text and text != "reason" else "feedback"): recorded.feedback}
    return {**inputs, **recorded.decision_data}


def _failed_step(task: ReviewTask) -> tuple[str, int] | None:
    return Step.objects.filter(pk=task.context.get("step_id")).values_list("key", "attempt").first()


def _hold(task: ReviewTask, why: str) -> None:
    """Leave the gate open as the source left it: out of the SLA sweep, a record rather than work."""
    ReviewTask.objects.filter(pk=task.pk).update(next_sweep_at=None, decide_by=None)
    log.info("replay: holding %s: %s", task, why)
    replay_compare(Requirement.objects.get(pk=task.requirement_id))
