"""Workers die mid-step on Redis + PostgreSQL: the reaper recovers the step once its lease
expires, and the requirement moves on exactly once — no duplicate stories, audit rows or events."""
import os
import signal
from collections import Counter

import pytest

from lifecycle.models import OutboxEvent, Requirement, Step
from lifecycle.runner import run_step
from lifecycle.services.intake import requirement_submit
from tests.flows import SAMPLE
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
SLOW_MODEL = {"AITEAM_REPLAY_LATENCY_MS": "2500"}


def submit(user) -> Requirement:
    return requirement_submit(user=user, brief=SAMPLE, title="crash test")


def running_step(req: Requirement, key: str = "po_clarify") -> Step:
    return wait_for(lambda: Step.objects.filter(requirement=req, key=key, state="running").first(),
                    what=f"{key} to be running", timeout=30)


def reached_stories(req: Requirement) -> bool:
    return Requirement.objects.get(pk=req.pk).state == "user_stories_created"


def assert_applied_exactly_once(req: Requirement) -> None:
    wait_for(lambda: not OutboxEvent.objects.filter(requirement=req, sent_at=None).exists(),
             what="the last events to be relayed")
    req = Requirement.objects.get(pk=req.pk)
    assert req.docs.count() == 1
    assert req.stories.count() == 4
    events = [t.event for t in req.transitions.filter(subject="requirement").order_by("id")]
    assert events == ["submit", "clarify", "create_stories"]
    names = Counter(OutboxEvent.objects.filter(requirement=req).values_list("name", flat=True))
    assert names == {"RequirementReceived": 1, "RequirementClarified": 1, "ReviewTaskOpened": 1}
    assert req.review_tasks.count() == 1


def test_a_worker_killed_with_its_process_group_mid_step_is_recovered_by_the_reaper(start_worker, alice):
    doomed = start_worker("doomed", **SLOW_MODEL)
    req = submit(alice)
    first = running_step(req)
    doomed.kill_group()
    start_worker("rescuer", beat=True, **SLOW_MODEL)
    wait_for(lambda: reached_stories(req), timeout=60, what="the reaper to recover the step")
    step = Step.objects.get(pk=first.pk)
    assert (step.state, step.runs, step.fence) == ("done", 2, 2)
    assert step.started_at >= first.lease_expires_at  # taken over only after the lease ran out
    assert_applied_exactly_once(req)
    assert req.llm_calls.filter(role="product_owner").count() == 1  # the killed call never finished


def test_only_the_pool_child_killed_mid_step_is_recovered(start_worker, alice):
    worker = start_worker("childless", concurrency=1, llm_pool="prefork", beat=True, **SLOW_MODEL)
    req = submit(alice)
    child = int(running_step(req).worker.rsplit(" pid ", 1)[1])
    assert child in worker.pool_children()
    os.kill(child, signal.SIGKILL)
    wait_for(lambda: reached_stories(req), timeout=60, what="the step to be recovered after the child died")
    assert_applied_exactly_once(req)
    assert worker.process.poll() is None  # the parent survived and replaced its child


def test_the_same_step_delivered_twice_at_once_runs_once(start_worker, alice):
    start_worker("twins", concurrency=2, **SLOW_MODEL)
    req = submit(alice)
    step = wait_for(lambda: Step.objects.filter(requirement=req, key="po_clarify").first(), what="the step row")
    run_step.delay(step.pk)  # a duplicate delivery, racing the first
    run_step.delay(step.pk)
    wait_for(lambda: reached_stories(req), timeout=60, what="the flow to finish")
    step.refresh_from_db()
    assert (step.runs, step.fence) == (1, 1)
    assert req.llm_calls.filter(role="product_owner").count() == 1
    assert_applied_exactly_once(req)
