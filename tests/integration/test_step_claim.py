"""Claiming a step delivered through the broker: the step row locked by SQL compiled once (its requirement read,
not locked), the lease written with the COMMIT: two round trips, and no ORM query built per claim."""
import pytest
import redis

from lifecycle.models import Step
from tests.integration.test_worker_crash import submit

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_claim_locks_the_step_only_and_writes_its_lease_with_the_commit_in_two_round_trips(
        broker_url, alice, django_assert_num_queries, monkeypatch):
    from lifecycle.services import steps
    from tests.integration.test_write_behind import _count_syncs

    req = submit(alice)  # no worker: its first step waits, queued
    redis.Redis.from_url(broker_url).flushdb()
    queued = Step.objects.get(requirement=req, key="po_clarify")
    syncs = _count_syncs(monkeypatch)
    with django_assert_num_queries(4) as captured:  # BEGIN, the lock; the lease's UPDATE, sent with COMMIT
        lease = steps.step_claim(step_id=queued.pk, worker="here")
    begin, lock, update, commit = (q["sql"] for q in captured.captured_queries)
    assert (begin, commit) == ("BEGIN", "COMMIT")
    assert lock.endswith('FOR UPDATE OF "lifecycle_step"') and '"lifecycle_requirement"' in lock  # read, unlocked
    assert update.startswith('UPDATE "lifecycle_step"') and update.endswith("/* pipelined */")
    assert len(syncs) == 2
    claimed = Step.objects.get(pk=queued.pk)
    assert (claimed.state, claimed.worker, claimed.fence, claimed.runs) == ("running", "here", queued.fence + 1, 1)
    assert (lease.step_id, lease.fence, lease.key) == (queued.pk, claimed.fence, "po_clarify")
    assert claimed.lease_expires_at > claimed.started_at
    assert steps.step_claim(step_id=queued.pk, worker="again") is None  # the live lease turns a duplicate away
    assert steps.step_claim(step_id=0, worker="here") is None  # a step deleted with its requirement
