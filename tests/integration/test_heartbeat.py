"""A running step renews its lease (lifecycle.services.leases.heartbeat): the lease is short, so a killed worker's
step is re-run within about a minute, yet a step may run longer than its lease."""
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from lifecycle.models import Step
from lifecycle.runner import run_step
from lifecycle.services import leases
from tests.integration.test_worker_crash import running_step, submit
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_step_running_longer_than_its_lease_keeps_it(start_worker, alice):
    start_worker("patient", default_timings=True, beat=True, AITEAM_STEP_LEASE_S="6", AITEAM_REAPER_INTERVAL_S="1",
                 AITEAM_REPLAY_LATENCY_MS="9000")
    req = submit(alice)
    first = running_step(req)
    leased_until = first.lease_expires_at
    wait_for(lambda: Step.objects.get(pk=first.pk).lease_expires_at > leased_until, timeout=10,
             what="the running step to renew its lease")
    step = wait_for(lambda: Step.objects.filter(pk=first.pk, state="done").first(), timeout=40,
                    what="the step to finish")
    assert (step.runs, step.fence) == (1, 1)  # never taken over: the reaper ran every second meanwhile
    assert (step.finished_at - step.started_at).total_seconds() > 6  # longer than its lease


def test_with_the_default_settings_a_killed_workers_step_is_run_again_within_90_seconds(start_worker, alice):
    doomed = start_worker("doomed-default", default_timings=True, AITEAM_REPLAY_LATENCY_MS="5000")
    req = submit(alice)
    first = running_step(req)
    doomed.kill_group()
    killed_at = timezone.now()
    rescuer = start_worker("rescuer-default", default_timings=True, beat=True, AITEAM_REPLAY_LATENCY_MS="5000")
    started = time.monotonic()
    step = wait_for(lambda: Step.objects.filter(pk=first.pk, state="done").first(), timeout=90,
                    what="the reaper to re-run the killed worker's step")
    assert (step.runs, step.fence) == (2, 2)
    assert (step.finished_at - killed_at).total_seconds() < 90 and time.monotonic() - started < 90
    assert req.llm_calls.filter(role="product_owner").count() == 1  # the killed call never finished
    redelivered = run_step.delay(first.pk)  # the killed worker's message, as the broker re-delivers it
    wait_for(lambda: f"run_step[{redelivered.id}] succeeded" in rescuer.output(), timeout=30,
             what="the re-delivered message to be run")
    step.refresh_from_db()
    assert (step.state, step.runs, step.fence) == ("done", 2, 2)  # it found nothing to do



def test_a_step_row_locked_by_its_apply_holds_up_neither_the_other_leases_nor_the_reaper(alice):
    """On PostgreSQL: while one step's row is locked (its apply, waiting on a repository's lock), the heartbeat skips
    that lease for this beat and renews the others, and the reaper passes over it: neither waits for the lock."""
    held, other = (leases.step_claim(step_id=step.pk, worker="test") for step in two_queued_steps(alice))
    locked, release = threading.Event(), threading.Event()

    def apply_holding_the_row():
        try:
            with transaction.atomic():
                Step.objects.select_for_update().get(pk=held.step_id)
                locked.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    Step.objects.filter(pk=held.step_id).update(lease_expires_at=timezone.now() - timedelta(seconds=5))
    holder = threading.Thread(target=apply_holding_the_row)
    holder.start()
    try:
        assert locked.wait(timeout=10)
        started = time.monotonic()
        assert leases._renew(held) is None  # skipped this beat, still held: not dropped
        assert leases._renew(other) is True
        assert leases.steps_reap() == []  # its lease ran out, but its apply is ending it: passed over
        assert time.monotonic() - started < 2
    finally:
        release.set()
        holder.join(timeout=30)
    assert leases._renew(held) is True  # the next beat renews it
    assert Step.objects.get(pk=held.step_id).lease_expires_at > timezone.now()


def two_queued_steps(user) -> list[Step]:
    """Two requirements' first steps, queued (no worker runs them here)."""
    steps = []
    for _ in range(2):
        req = submit(user)
        steps.append(wait_for(lambda req=req: Step.objects.filter(requirement=req, state="queued").first(),
                              timeout=10, what="the first step to be queued"))
    return steps
