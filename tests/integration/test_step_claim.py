"""Claiming a step delivered through the broker: the step row locked (its requirement read, not locked), the
lease written, a duplicate delivery turned away while the lease lives."""
import pytest
import redis

from lifecycle.models import Requirement, Step
from tests.integration.test_worker_crash import submit

pytestmark = pytest.mark.django_db(transaction=True)


def queued_first_step(broker_url, alice) -> Step:
    req = submit(alice)  # no worker: its first step waits, queued
    redis.Redis.from_url(broker_url).flushdb()
    return Step.objects.get(requirement=req, key="po_clarify")


def test_a_claim_locks_the_step_only_writes_its_lease_and_turns_a_duplicate_away(
        broker_url, alice, django_assert_num_queries):
    from lifecycle.services import leases

    queued = queued_first_step(broker_url, alice)
    with django_assert_num_queries(4) as captured:  # BEGIN, the lock, the lease's UPDATE, COMMIT
        lease = leases.step_claim(step_id=queued.pk, worker="here")
    begin, lock, update, commit = (q["sql"] for q in captured.captured_queries)
    assert (begin, commit) == ("BEGIN", "COMMIT")
    assert lock.endswith('FOR UPDATE OF "lifecycle_step"') and '"lifecycle_requirement"' in lock  # read, unlocked
    assert update.startswith('UPDATE "lifecycle_step"')
    claimed = Step.objects.get(pk=queued.pk)
    assert (claimed.state, claimed.worker, claimed.fence, claimed.runs) == ("running", "here", queued.fence + 1, 1)
    assert (lease.step_id, lease.fence, lease.key) == (queued.pk, claimed.fence, "po_clarify")
    assert claimed.lease_expires_at > claimed.started_at
    assert leases.step_claim(step_id=queued.pk, worker="again") is None  # the live lease turns a duplicate away
    assert leases.step_claim(step_id=0, worker="here") is None  # a step deleted with its requirement


def test_a_claimed_step_applies_on_its_requirement_as_it_is_when_the_output_arrives(alice):
    """A model call takes seconds: whatever changed the requirement meanwhile is what the apply sees and keeps."""
    from lifecycle import runner
    from lifecycle.services import leases
    from tests.integration.test_inline_steps import in_development, retried_development_apply

    req = in_development(alice)
    step = Step.objects.create(requirement=req, key="tl_plan", attempt=1)
    lease = leases.step_claim(step_id=step.pk, worker="here")
    Requirement.objects.filter(pk=req.pk).update(title="edited meanwhile")  # a reviewer, say, during the call
    applied_on = []
    runner._apply(retried_development_apply(applied_on), lease, None)
    assert applied_on == [("in_development", "edited meanwhile")]
    assert Step.objects.get(pk=step.pk).state == "done"
    assert Requirement.objects.get(pk=req.pk).title == "edited meanwhile"
    assert req.transitions.filter(event="retry_development").count() == 1
    assert Step.objects.filter(requirement=req, key="engineer:next").count() == 1
