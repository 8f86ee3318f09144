"""Claiming a step delivered through the broker: the step row locked by SQL compiled once (its requirement read,
not locked), the lease written with the COMMIT, and what the step starts from (its budget snapshot, and for a
step applied at commit its rows) read right after that COMMIT, in the same pipeline: two round trips in all, and
the step's budget check, input and lock then cost none, as for a step claimed inline."""
import pytest
import redis
from django.db import transaction

from lifecycle.models import Requirement, Step
from tests.integration.test_worker_crash import submit

pytestmark = pytest.mark.django_db(transaction=True)


def queued_first_step(broker_url, alice) -> Step:
    req = submit(alice)  # no worker: its first step waits, queued
    redis.Redis.from_url(broker_url).flushdb()
    return Step.objects.get(requirement=req, key="po_clarify")


def test_a_claim_locks_the_step_only_and_writes_its_lease_and_reads_its_start_with_the_commit_in_two_round_trips(
        broker_url, alice, django_assert_num_queries, monkeypatch):
    from aiteam.db import by_pk
    from lifecycle.services import budgets, steps
    from tests.integration.test_write_behind import _count_syncs

    queued = queued_first_step(broker_url, alice)
    syncs = _count_syncs(monkeypatch)
    with django_assert_num_queries(5) as captured:  # BEGIN, the lock; the lease's UPDATE, COMMIT, the read after it
        lease = steps.step_claim(step_id=queued.pk, worker="here", rows_for=lambda key: True)
    begin, lock, update, read, commit = (q["sql"] for q in captured.captured_queries)  # COMMIT logged last
    assert (begin, commit) == ("BEGIN", "COMMIT")
    assert lock.endswith('FOR UPDATE OF "lifecycle_step"') and '"lifecycle_requirement"' in lock  # read, unlocked
    assert update.startswith('UPDATE "lifecycle_step"') and update.endswith("/* pipelined */")
    assert "xmin" in read and "r_steps" in read  # the rows and the budget snapshot, one statement
    assert len(syncs) == 2
    with django_assert_num_queries(0):  # the step starts from what the claim read (nothing ran since)
        assert budgets.budget_allows(lease)
        brief = steps.requirement_values(lease, ("brief",))
    claimed = Step.objects.get(pk=queued.pk)
    assert (claimed.state, claimed.worker, claimed.fence, claimed.runs) == ("running", "here", queued.fence + 1, 1)
    assert (lease.step_id, lease.fence, lease.key) == (queued.pk, claimed.fence, "po_clarify")
    assert claimed.lease_expires_at > claimed.started_at
    assert brief == by_pk.values(Requirement, lease.requirement_id, ("brief",))
    with transaction.atomic():
        step, _ = steps.lock_at_commit(lease)  # the rows as the claim left them: the lease's fence holds
        assert (step.state, step.fence) == ("running", lease.fence)
        transaction.set_rollback(True)  # the check queued for the rows goes nowhere

    assert steps.step_claim(step_id=queued.pk, worker="again") is None  # the live lease turns a duplicate away
    assert steps.step_claim(step_id=0, worker="here") is None  # a step deleted with its requirement


def test_a_step_not_applied_at_commit_gets_its_budget_snapshot_only(broker_url, alice, django_assert_num_queries):
    from lifecycle.services import budgets, steps

    queued = queued_first_step(broker_url, alice)
    lease = steps.step_claim(step_id=queued.pk, worker="here")
    assert lease.rows is None and lease.budget.current
    with django_assert_num_queries(0):
        assert budgets.budget_allows(lease)
    with django_assert_num_queries(1):  # no rows: its input is read by primary key
        steps.requirement_values(lease, ("brief",))


def test_a_claimed_step_whose_requirement_changed_before_its_apply_is_applied_again_under_the_lock_once(alice):
    """A model call takes seconds: whatever changed the requirement meanwhile makes the apply on the claim's rows
    roll back (RowsChanged), and it is applied again, locking, on the rows as they are."""
    from agents import tasks
    from lifecycle.services import steps
    from tests.integration.test_inline_steps import in_development, retried_development_apply

    req = in_development(alice)
    step = Step.objects.create(requirement=req, key="tl_plan", attempt=1)
    lease = steps.step_claim(step_id=step.pk, worker="here", rows_for=lambda key: True)
    assert lease.rows.row is not None
    Requirement.objects.filter(pk=req.pk).update(title="edited meanwhile")  # a reviewer, say, during the call
    applied_on = []
    tasks._apply(retried_development_apply(applied_on), lease, None)
    assert applied_on == [("in_development", "crash test"), ("in_development", "edited meanwhile")]
    assert Step.objects.get(pk=step.pk).state == "done"
    assert Requirement.objects.get(pk=req.pk).title == "edited meanwhile"
    assert req.transitions.filter(event="retry_development").count() == 1  # the first try left nothing
    assert Step.objects.filter(requirement=req, key="engineer:next").count() == 1
