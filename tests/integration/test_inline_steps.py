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
    return len(re.findall(r"Task agents\.tasks\.run_step\[[0-9a-f-]+\] received", worker.output()))


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

    from lifecycle.services import steps

    req = submit(alice)  # no worker: its first step's message waits on the llm queue
    steps._idle_until.clear()
    with steps.inline_slot(queue="llm", worker="here") as busy:
        with transaction.atomic():
            steps.step_schedule(requirement_id=req.pk, key="ba_stories", attempt=1)
    queued = Step.objects.get(requirement=req, key="ba_stories")
    assert busy.lease is None and queued.state == "queued"  # another message waits: leave it to the broker

    redis.Redis.from_url(broker_url).flushdb()
    with steps.inline_slot(queue="llm", worker="here") as rolled_back:
        with pytest.raises(RuntimeError), transaction.atomic():
            steps.step_schedule(requirement_id=req.pk, key="tl_plan", attempt=1)
            raise RuntimeError("the apply failed")
    assert rolled_back.lease is None and not Step.objects.filter(requirement=req, key="tl_plan").exists()

    with steps.inline_slot(queue="llm", worker="here") as slot:
        with transaction.atomic():
            for key in ("tl_plan", "self_test", "devops"):
                steps.step_schedule(requirement_id=req.pk, key=key, attempt=1)
    first, other_queue, second = (Step.objects.get(requirement=req, key=key) for key in ("tl_plan", "self_test", "devops"))
    assert slot.lease and slot.lease.step_id == first.pk
    assert (first.state, first.fence, first.runs, first.worker) == ("running", 1, 1, "here")
    assert other_queue.state == second.state == "queued"  # fan-out and queue changes keep the broker hop


def test_a_message_waiting_at_any_priority_keeps_the_queue_busy(broker_url):
    from agents.tasks import run_step
    from lifecycle.services import steps

    redis.Redis.from_url(broker_url).flushdb()
    assert steps.queue_idle("llm")
    steps._idle_until.clear()  # an idle answer is trusted for a few ms: ask Redis again
    run_step.apply_async((0,), queue="llm", priority=7)  # Redis keeps priorities in lists of their own
    assert not steps.queue_idle("llm")
    run_step.apply_async((0,), queue="llm")
    assert steps._queue_sizer().waiting("llm") == 2
    redis.Redis.from_url(broker_url).flushdb()
    assert steps.queue_idle("llm")


def test_an_inline_step_checks_its_budget_with_the_snapshot_read_at_the_commit_that_claimed_it(
        broker_url, alice, django_assert_num_queries, monkeypatch):
    """The snapshot goes out with the claiming COMMIT; the check then costs no query, unless something ran on
    the connection after it (an on-commit handler may have changed the requirement): then it reads again."""
    import dataclasses
    from decimal import Decimal

    from django.db import transaction

    from lifecycle.handlers import HANDLERS
    from lifecycle.models import LLMCall
    from lifecycle.services import budgets, steps
    from lifecycle.services.outbox import emit

    req = submit(alice)
    redis.Redis.from_url(broker_url).flushdb()
    steps._idle_until.clear()

    def claimed_inline(key: str) -> steps.Lease:
        with steps.inline_slot(queue="llm", worker="here") as slot, transaction.atomic():
            steps.step_schedule(requirement_id=req.pk, key=key, attempt=1)
        return slot.lease

    lease = claimed_inline("ba_stories")
    assert budgets._snapshot_row(lease.budget.row) == budgets._snapshot(lease) is not None
    lease = claimed_inline("tl_plan")
    with django_assert_num_queries(0):
        assert budgets.budget_allows(lease)

    def overspend(event) -> None:  # an event handler, relayed on commit after the snapshot was read
        LLMCall.objects.create(requirement=req, role="tech_architect", provider="scripted", model="m",
                               input_tokens=10**9, output_tokens=0, cost_usd=Decimal("1000"))

    monkeypatch.setitem(HANDLERS, "Overspent", [overspend])
    with steps.inline_slot(queue="llm", worker="here") as slot, transaction.atomic():
        emit(req, "Overspent")
        steps.step_schedule(requirement_id=req.pk, key="architect_spec", attempt=1)
    lease = slot.lease
    assert lease.budget.row is not None and not lease.budget.current
    assert not budgets.budget_allows(lease)  # read again: the spend the handler wrote counts
    assert Step.objects.get(pk=lease.step_id).state == "skipped"

    from aiteam.db import write_behind

    found_nothing = write_behind.ReadAtCommit("SELECT 1 WHERE false", ())
    found_nothing._arrived(None)  # came back current, without a row
    lease = claimed_inline("qc_tests")  # not taken as "nothing to check" (that allows): read again, overspent
    assert not budgets.budget_allows(dataclasses.replace(lease, budget=found_nothing))


def claimed_inline(req, key: str):
    """The lease of `key`, scheduled and claimed inline as an apply's transaction does (no worker involved)."""
    from django.db import transaction

    from lifecycle.services import steps

    with steps.inline_slot(queue="llm", worker="here", rows_for=lambda key: True) as slot, transaction.atomic():
        steps.step_schedule(requirement_id=req.pk, key=key, attempt=1)
    return slot.lease


def retried_development_apply(applied_on: list):
    """An apply of the machinery's kind (bench/_machinery.py), noting the requirement it was given each time."""
    from django.db import transaction

    from agents.tasks import StepSpec
    from lifecycle.actors import Actor
    from lifecycle.services import steps
    from lifecycle.services.outbox import emit
    from lifecycle.services.transitions import transition

    def apply(*, lease, output) -> None:
        with transaction.atomic():
            step, requirement = steps.lock_at_commit(lease)
            applied_on.append((requirement.state, requirement.title))
            transition(requirement, "retry_development", actor=Actor.agent("test"), metadata={"step": lease.key})
            emit(requirement, "Applied", {"title": requirement.title})
            steps.step_finish(step)
            steps.step_schedule(requirement_id=requirement.pk, key="engineer:next", attempt=1)

    return StepSpec(apply, run=lambda lease: None, at_commit=True)


def in_development(alice):
    req = submit(alice)
    Requirement.objects.filter(pk=req.pk).update(state="in_development")
    return req


def test_an_inline_step_applies_on_the_rows_read_with_the_commit_that_claimed_it_in_one_round_trip(
        broker_url, alice, django_assert_num_queries, monkeypatch):
    from agents import tasks
    from tests.integration.test_write_behind import _count_syncs

    req = in_development(alice)
    redis.Redis.from_url(broker_url).flushdb()
    lease = claimed_inline(req, "tl_plan")
    assert lease.rows.row is not None
    applied_on, syncs = [], _count_syncs(monkeypatch)
    with django_assert_num_queries(8) as captured:  # BEGIN, the check, five writes, COMMIT
        tasks._apply(retried_development_apply(applied_on), lease, None)
    reads = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("SELECT")]
    assert len(reads) == 1 and "aiteam_expect_one" in reads[0]  # the check; no lock query of its own
    assert len(syncs) == 1  # all in one pipeline
    assert applied_on == [("in_development", "crash test")]
    assert Step.objects.get(pk=lease.step_id).state == "done"
    assert req.transitions.filter(event="retry_development").count() == 1
    assert OutboxEvent.objects.filter(requirement=req, name="Applied").count() == 1


def test_a_requirement_changed_after_the_snapshot_is_applied_again_under_the_lock_once(broker_url, alice):
    from agents import tasks
    from lifecycle.services import steps

    req = in_development(alice)
    redis.Redis.from_url(broker_url).flushdb()
    lease = claimed_inline(req, "tl_plan")
    Requirement.objects.filter(pk=req.pk).update(title="edited meanwhile")  # a reviewer, say, after the snapshot
    applied_on = []
    with steps.inline_slot(queue="llm", worker="here") as slot:
        tasks._apply(retried_development_apply(applied_on), lease, None, slot)
    assert applied_on == [("in_development", "crash test"), ("in_development", "edited meanwhile")]
    following = Step.objects.get(requirement=req, key="engineer:next")  # scheduled once, by the second try
    assert slot.lease.step_id == following.pk and following.state == "running"  # the slot took it again
    assert Requirement.objects.get(pk=req.pk).title == "edited meanwhile"  # their change kept
    assert Step.objects.get(pk=lease.step_id).state == "done"
    assert req.transitions.filter(event="retry_development").count() == 1  # the first try left nothing
    assert list(OutboxEvent.objects.filter(requirement=req, name="Applied").values_list("payload", flat=True)) == [
        {"title": "edited meanwhile"}]


def test_a_requirement_cancelled_after_the_snapshot_is_decided_again_on_its_rows_and_the_step_skipped(
        broker_url, alice):
    from agents import tasks
    from lifecycle.services import steps

    req = in_development(alice)
    redis.Redis.from_url(broker_url).flushdb()
    lease = claimed_inline(req, "tl_plan")
    Requirement.objects.filter(pk=req.pk).update(state="cancelled")
    applied_on = []
    with steps.inline_slot(queue="llm", worker="here") as slot:
        tasks._apply(retried_development_apply(applied_on), lease, None, slot)
    assert applied_on == [("in_development", "crash test"), ("cancelled", "crash test")]  # the retry sees it
    step = Step.objects.get(pk=lease.step_id)
    assert step.state == "skipped" and "cancelled" in step.error
    assert not req.transitions.filter(event="retry_development").exists()
    assert slot.lease is None and not Step.objects.filter(requirement=req, key="engineer:next").exists()


def test_the_snapshot_rows_load_what_the_orm_loads_and_a_stale_fence_is_refused_on_them(broker_url, alice):
    from django.db import transaction

    from lifecycle.errors import StaleStep
    from lifecycle.services import steps

    req = in_development(alice)
    Requirement.objects.filter(pk=req.pk).update(run_settings={"budgets": {"requirement": {"steps": 7}}})
    redis.Redis.from_url(broker_url).flushdb()
    lease = claimed_inline(req, "tl_plan")
    with transaction.atomic():
        step, requirement = steps.lock_at_commit(lease)
    orm = Step.objects.select_related("requirement").get(pk=lease.step_id)
    for model, mine, theirs in ((Step, step, orm), (Requirement, requirement, orm.requirement)):
        assert [f.value_from_object(mine) for f in model._meta.concrete_fields] == \
            [f.value_from_object(theirs) for f in model._meta.concrete_fields]
    assert step.requirement is requirement and not step._state.adding
    with pytest.raises(StaleStep), transaction.atomic():
        steps.lock_at_commit(steps.Lease(lease.step_id, lease.fence + 1, req.pk, lease.key, 1, rows=lease.rows))


def test_an_apply_not_marked_at_commit_locks_first_and_runs_once(broker_url, alice):
    """Applies that commit to a workspace must hold the lock before they do: their lease's rows are not used."""
    import dataclasses

    from agents import tasks

    req = in_development(alice)
    redis.Redis.from_url(broker_url).flushdb()
    lease = claimed_inline(req, "tl_plan")
    Requirement.objects.filter(pk=req.pk).update(state="cancelled")
    applied_on = []
    tasks._apply(dataclasses.replace(retried_development_apply(applied_on), at_commit=False), lease, None)
    assert applied_on == [("cancelled", "crash test")]  # locked at once: the rows as they are, one try
    assert Step.objects.get(pk=lease.step_id).state == "skipped"


def test_an_inline_step_reads_its_input_and_budget_from_the_read_with_its_claiming_commit(
        broker_url, alice, django_assert_num_queries):
    from aiteam.db import by_pk
    from lifecycle.services import budgets, steps

    req = in_development(alice)
    redis.Redis.from_url(broker_url).flushdb()
    lease = claimed_inline(req, "tl_plan")
    fields = ("brief", "title", "created_at", "clarifications", "prompt_bundle_id")
    with django_assert_num_queries(0):
        snapshot = steps.requirement_values(lease, fields)
        assert budgets.budget_allows(lease)  # its budget snapshot came in the same read
    assert lease.budget.current and budgets._snapshot_row(lease.budget.row) == budgets._snapshot(lease)
    assert not lease.budget.current and not lease.rows.current  # a statement has run since: one read, both parts
    assert snapshot == by_pk.values(Requirement, req.pk, fields)
    with django_assert_num_queries(1):  # a lease without rows (locking, or not applied at commit) reads them
        assert steps.requirement_values(lease.locking(), fields) == snapshot

