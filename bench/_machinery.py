"""An 8-step pipeline on aiteam's real step machinery, with trivial work in each step, for bench/step_overhead.py.

LangGraph's nodes in that benchmark do trivial work on a ~2 KB state; these steps do the same, so what is
compared is the orchestration: each step is a Step row run by the real `run_step` task (claim with a lease and a
fence, or an inline claim), reads its ~2 KB input (the requirement's brief), rotates it, and applies the result in
one transaction through the real services: fenced lock, requirement lock, a guarded FSM transition with its audit
row (the lifecycle's in_development self-loop, `retry_development`), an outbox event carrying the 2 KB state, the
step marked done and the next step scheduled (inline in the same worker, or through the broker).

Start a worker with `celery -A bench._machinery worker …`: importing this module registers the eight step kinds
in that process. The bench process imports it too (to create the requirements and schedule the first step).
"""
from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aiteam.settings")
django.setup()  # the worker imports this module before Celery's Django fixup sets Django up

from django.db import connection, transaction  # noqa: E402

from aiteam.celery import app  # noqa: E402, F401  (celery -A bench._machinery finds it here)
from lifecycle import step_keys  # noqa: E402
from lifecycle.actors import Actor  # noqa: E402
from lifecycle.models import Requirement  # noqa: E402
from lifecycle.runner import STEPS, StepSpec  # noqa: E402
from lifecycle.services import leases, scheduling  # noqa: E402
from lifecycle.services.outbox import emit  # noqa: E402
from lifecycle.services.transitions import transition  # noqa: E402
from lifecycle.states import RequirementState  # noqa: E402

KEYS = [f"bench_{i}" for i in range(1, 9)]
NEXT = dict(zip(KEYS, KEYS[1:], strict=False))
ACTOR = Actor.agent("bench")
CHANNEL = "aiteam_bench_done"  # NOTIFY channel of announce()
ANNOUNCE = "AITEAM_BENCH_ANNOUNCE"  # "1": the last step announces its commit (bench/step_overhead.py's worker)


def load_and_rotate(lease: leases.Lease) -> str:
    doc = Requirement.objects.values_list("brief", flat=True).get(pk=lease.requirement_id)
    return doc[1:] + doc[:1]


def apply(*, lease: leases.Lease, output: str) -> None:
    with leases.step_applying(lease) as (_, requirement):
        transition(requirement, "retry_development", actor=ACTOR, metadata={"step": lease.key})
        emit(requirement, "BenchStepDone", {"step": lease.key, "state": output})
        if lease.key in NEXT:
            scheduling.step_schedule(requirement_id=lease.requirement_id, key=NEXT[lease.key], attempt=1)
        elif os.environ.get(ANNOUNCE) == "1":
            transaction.on_commit(lambda: announce(lease.requirement_id), robust=True)


def announce(requirement_id) -> None:
    """Tell the benchmark, which LISTENs, that this requirement's last step has committed (after the step's
    finished_at, so no measured step pays for it): waiting so costs the machine nothing, where polling the
    database every few milliseconds took CPU from the worker being measured."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, str(requirement_id)])


def start(requirement: Requirement) -> None:
    """Put a fresh requirement where the self-loop applies and queue its first step."""
    with transaction.atomic():
        Requirement.objects.filter(pk=requirement.pk).update(state=RequirementState.IN_DEVELOPMENT)
        scheduling.step_schedule(requirement_id=requirement.pk, key=KEYS[0], attempt=1)


for _key in KEYS:
    STEPS[_key] = StepSpec(apply, run=load_and_rotate)
    step_keys.ROLE_OF_STEP[_key] = "bench"
