"""A worker runs the next step of a chain inline (no broker hop) when it is on the same queue and nothing
waits there. The step row still carries a lease and a fence, its output still writes the audit row and the
outbox event, and a worker killed during the inline step loses nothing: the reaper resumes it."""
import re

import pytest
import redis
from django.utils import timezone

from lifecycle.models import OutboxEvent, Requirement, Step
from tests.integration.test_worker_crash import assert_applied_exactly_once, reached_stories, running_step, submit
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
SLOW_MODEL_WIDE_WINDOW = {"AITEAM_REPLAY_LATENCY_MS": "1500", "AITEAM_STEP_INLINE_WINDOW_S": "5",
                          "AITEAM_STEP_HARD_LIMIT_S": "14", "AITEAM_STEP_LEASE_S": "15"}


def run_step_messages(worker) -> int:
    return len(re.findall(r"Task lifecycle\.runner\.run_step\[[0-9a-f-]+\] received", worker.output()))


def the_analyst_runs_inline(req) -> Step:
    analyst = running_step(req, key="ba_stories")
    product_owner = Step.objects.get(requirement=req, key="po_clarify")
    assert analyst.worker == product_owner.worker  # the same pool process went straight on
    assert analyst.started_at <= analyst.enqueued_at  # inserted already claimed: it never waited in a queue
    assert (analyst.fence, analyst.runs) == (1, 1)
    assert analyst.lease_expires_at > timezone.now()
    return analyst


def test_an_inline_step_holds_a_lease_and_writes_its_audit_row_and_events_without_a_broker_hop(
        start_worker, broker_url, alice):
    redis.Redis.from_url(broker_url).flushdb()
    worker = start_worker("inline", **SLOW_MODEL_WIDE_WINDOW)
    req = submit(alice)
    the_analyst_runs_inline(req)
    wait_for(lambda: reached_stories(req), timeout=60, what="the stories")
    assert_applied_exactly_once(req)  # the inline step's transition, audit row and ReviewTaskOpened event, once
    audit = req.transitions.get(subject="requirement", event="create_stories")
    assert audit.actor_role == "business_analyst"
    assert run_step_messages(worker) == 1  # two steps, one message: the analyst's came inline


def test_a_worker_killed_during_an_inline_step_loses_nothing(start_worker, alice):
    doomed = start_worker("doomed-inline", **SLOW_MODEL_WIDE_WINDOW)
    req = submit(alice)
    analyst = the_analyst_runs_inline(req)
    doomed.kill_group()
    start_worker("rescuer", beat=True, **SLOW_MODEL_WIDE_WINDOW)
    wait_for(lambda: reached_stories(req), timeout=60, what="the reaper to resume the inline step")
    analyst.refresh_from_db()
    assert (analyst.state, analyst.runs, analyst.fence) == ("done", 2, 2)
    assert_applied_exactly_once(req)
    assert req.llm_calls.filter(role="business_analyst").count() == 1  # the killed call never finished


def test_with_no_inline_window_every_step_goes_through_the_broker(start_worker, broker_url, alice):
    redis.Redis.from_url(broker_url).flushdb()  # no message left over from an earlier test's killed worker
    worker = start_worker("hops", AITEAM_STEP_INLINE_WINDOW_S="0")
    req = submit(alice)
    wait_for(lambda: reached_stories(req), timeout=60, what="the stories")
    analyst = Step.objects.get(requirement=req, key="ba_stories")
    assert analyst.started_at > analyst.enqueued_at
    assert run_step_messages(worker) == 2


def test_the_slot_takes_one_step_on_its_queue_only_when_the_queue_is_idle_and_only_after_commit(broker_url, alice):
    from django.db import transaction

    from lifecycle.services import inline, scheduling

    req = submit(alice)  # no worker: its first step's message waits on the llm queue
    inline._idle_until.clear()
    with inline.inline_slot(queue="llm", worker="here") as busy:
        with transaction.atomic():
            scheduling.step_schedule(requirement_id=req.pk, key="ba_stories", attempt=1)
    queued = Step.objects.get(requirement=req, key="ba_stories")
    assert busy.lease is None and queued.state == "queued"  # another message waits: leave it to the broker

    redis.Redis.from_url(broker_url).flushdb()
    with inline.inline_slot(queue="llm", worker="here") as rolled_back:
        with pytest.raises(RuntimeError), transaction.atomic():
            scheduling.step_schedule(requirement_id=req.pk, key="tl_plan", attempt=1)
            raise RuntimeError("the apply failed")
    assert rolled_back.lease is None and not Step.objects.filter(requirement=req, key="tl_plan").exists()

    with inline.inline_slot(queue="llm", worker="here") as slot:
        with transaction.atomic():
            for key in ("tl_plan", "self_test", "devops"):
                scheduling.step_schedule(requirement_id=req.pk, key=key, attempt=1)
    first, other_queue, second = (Step.objects.get(requirement=req, key=key) for key in ("tl_plan", "self_test", "devops"))
    assert slot.lease and slot.lease.step_id == first.pk
    assert (first.state, first.fence, first.runs, first.worker) == ("running", 1, 1, "here")
    assert other_queue.state == second.state == "queued"  # fan-out and queue changes keep the broker hop


def test_a_message_waiting_at_any_priority_keeps_the_queue_busy(broker_url):
    from lifecycle.runner import run_step
    from lifecycle.services import inline

    redis.Redis.from_url(broker_url).flushdb()
    assert inline.queue_idle("llm")
    inline._idle_until.clear()  # an idle answer is trusted for a few ms: ask Redis again
    run_step.apply_async((0,), queue="llm", priority=7)  # Redis keeps priorities in lists of their own
    assert not inline.queue_idle("llm")
    run_step.apply_async((0,), queue="llm")
    assert inline._queue_sizer().waiting("llm") == 2
    redis.Redis.from_url(broker_url).flushdb()
    assert inline.queue_idle("llm")


def claimed_inline(req, key: str):
    """The lease of `key`, scheduled and claimed inline as an apply's transaction does (no worker involved)."""
    from django.db import transaction

    from lifecycle.services import inline, scheduling

    with inline.inline_slot(queue="llm", worker="here") as slot, transaction.atomic():
        scheduling.step_schedule(requirement_id=req.pk, key=key, attempt=1)
    return slot.lease


def retried_development_apply(applied_on: list):
    """An apply of the machinery's kind (bench/_machinery.py), noting the requirement it was given each time."""
    from lifecycle.actors import Actor
    from lifecycle.runner import StepSpec
    from lifecycle.services import leases, scheduling
    from lifecycle.services.outbox import emit
    from lifecycle.services.transitions import transition

    def apply(*, lease, output) -> None:
        with leases.step_applying(lease) as (step, requirement):
            applied_on.append((requirement.state, requirement.title))
            transition(requirement, "retry_development", actor=Actor.agent("test"), metadata={"step": lease.key})
            emit(requirement, "Applied", {"title": requirement.title})
            scheduling.step_schedule(requirement_id=requirement.pk, key="engineer:next", attempt=1)

    return StepSpec(apply, run=lambda lease: None)


def in_development(alice):
    req = submit(alice)
    Requirement.objects.filter(pk=req.pk).update(state="in_development")
    return req


def test_an_inline_step_applies_on_the_requirement_as_it_is_then_and_the_slot_takes_the_next_step(broker_url, alice):
    from lifecycle import runner
    from lifecycle.services import inline

    req = in_development(alice)
    redis.Redis.from_url(broker_url).flushdb()
    lease = claimed_inline(req, "tl_plan")
    Requirement.objects.filter(pk=req.pk).update(title="edited meanwhile")  # a reviewer, say, during the call
    applied_on = []
    with inline.inline_slot(queue="llm", worker="here") as slot:
        runner._apply(retried_development_apply(applied_on), lease, None)
    assert applied_on == [("in_development", "edited meanwhile")]
    following = Step.objects.get(requirement=req, key="engineer:next")
    assert slot.lease.step_id == following.pk and following.state == "running"
    assert Requirement.objects.get(pk=req.pk).title == "edited meanwhile"  # their change kept
    assert Step.objects.get(pk=lease.step_id).state == "done"
    assert req.transitions.filter(event="retry_development").count() == 1
    assert list(OutboxEvent.objects.filter(requirement=req, name="Applied").values_list("payload", flat=True)) == [
        {"title": "edited meanwhile"}]


def test_a_requirement_cancelled_while_its_step_ran_skips_the_step_and_schedules_nothing(broker_url, alice):
    from lifecycle import runner
    from lifecycle.services import inline

    req = in_development(alice)
    redis.Redis.from_url(broker_url).flushdb()
    lease = claimed_inline(req, "tl_plan")
    Requirement.objects.filter(pk=req.pk).update(state="cancelled")
    applied_on = []
    with inline.inline_slot(queue="llm", worker="here") as slot:
        runner._apply(retried_development_apply(applied_on), lease, None)
    assert applied_on == [("cancelled", "crash test")]
    step = Step.objects.get(pk=lease.step_id)
    assert step.state == "skipped" and "cancelled" in step.error
    assert not req.transitions.filter(event="retry_development").exists()
    assert slot.lease is None and not Step.objects.filter(requirement=req, key="engineer:next").exists()


def test_an_inline_lease_with_a_stale_fence_is_refused(broker_url, alice):
    from django.db import transaction

    from lifecycle.errors import StaleStep
    from lifecycle.services import leases

    req = in_development(alice)
    redis.Redis.from_url(broker_url).flushdb()
    lease = claimed_inline(req, "tl_plan")
    with transaction.atomic():
        step, requirement = leases.lock_for_apply(lease)
    assert step.requirement is requirement and (step.state, step.fence) == ("running", lease.fence)
    with pytest.raises(StaleStep), transaction.atomic():
        leases.lock_for_apply(leases.Lease(lease.step_id, lease.fence + 1, req.pk, lease.key, 1))
