"""Steps on a thread pool (the llm queue as the Procfile runs it): Celery enforces no time limit there, so the lease
heartbeat stops at the step's hard limit and the reaper takes a stuck step back, its late write refused; and the
heartbeat is one thread with one database connection for the whole pool."""
import pytest
from django.db import connection

from lifecycle.models import Step
from tests.integration.test_worker_crash import submit
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

# The model answers after 8 s; the step's hard limit is 3 s, its lease 1.5 s (renewed every 0.5 s).
STUCK = {"AITEAM_REPLAY_LATENCY_MS": "8000", "AITEAM_STEP_SOFT_LIMIT_S": "2", "AITEAM_STEP_INLINE_WINDOW_S": "0",
         "AITEAM_STEP_HARD_LIMIT_S": "3", "AITEAM_STEP_LEASE_S": "1.5", "AITEAM_STEP_MAX_RUNS": "2"}


def test_a_step_past_its_hard_limit_is_taken_back_by_the_reaper_and_its_late_write_refused(start_worker, alice):
    worker = start_worker("stuck", llm_pool="threads", llm_concurrency=4, beat=True, **STUCK)
    req = submit(alice)
    first = wait_for(lambda: Step.objects.filter(requirement=req, key="po_clarify", state="running").first(),
                     what="po_clarify to be running")
    retaken = wait_for(lambda: Step.objects.filter(pk=first.pk, runs=2, state="running").first(), timeout=15,
                       what="the reaper to take the step back and a second run to claim it")
    assert (retaken.started_at - first.started_at).total_seconds() >= 3  # renewed up to its hard limit, not beyond
    assert "ran past its hard time limit" in worker.output()
    wait_for(lambda: f"write with fence {first.fence} refused" in worker.output(), timeout=15,
             what="the first run's late write to be refused")
    assert req.docs.count() == 0  # nothing of the first run was applied
    step = wait_for(lambda: Step.objects.filter(pk=first.pk, state="failed").first(), timeout=30,
                    what="the second run, stuck too, to be taken back and given up")
    assert (step.runs, step.fence) == (2, 2)
    assert step.error.startswith("gave up after 2 runs")
    assert req.docs.count() == 0 and req.transitions.filter(event="clarify").count() == 0


def test_the_heartbeat_is_one_connection_however_many_steps_run(start_worker, alice):
    start_worker("crowd", llm_pool="threads", llm_concurrency=6, AITEAM_REPLAY_LATENCY_MS="6000",
                 AITEAM_STEP_LEASE_S="3")
    requirements = [submit(alice) for _ in range(6)]
    wait_for(lambda: Step.objects.filter(requirement__in=requirements, state="running").count() == 6, timeout=30,
             what="six steps running at once")
    renewed = {s.pk: s.lease_expires_at for s in Step.objects.filter(requirement__in=requirements, state="running")}
    wait_for(lambda: all(s.lease_expires_at > renewed[s.pk]
                         for s in Step.objects.filter(pk__in=renewed, state="running")), timeout=15,
             what="every running step's lease to be renewed")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'aiteam-worker-crowd'")
        (connections,) = cursor.fetchone()
    assert Step.objects.filter(pk__in=renewed, state="running").count() == 6  # still all running when counted
    # one connection per thread running a step, one for the heartbeat, one at most for the consumer's own queries
    assert connections <= 6 + 2
