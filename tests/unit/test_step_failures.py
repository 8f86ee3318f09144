"""Steps that fail, repeat or arrive late: nothing is lost, nothing is applied twice."""
import pytest

from agents.llm.base import LLMTransientError
from agents.schemas import ProductOwnerOutput
from lifecycle.errors import StaleStep
from lifecycle.models import Step
from lifecycle.runner import run_step
from lifecycle.services import dispatch, inline, leases
from lifecycle.services.product import product_owner_apply
from tests.answers import BA_STORIES, PO_CLEAR, answer
from tests.flows import decide, fresh, pending, submit

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_transient_error_is_retried_and_the_step_completes(alice, scripted):
    scripted.enqueue(LLMTransientError("529 overloaded")).enqueue(PO_CLEAR).enqueue(BA_STORIES)
    req = submit(alice)
    assert req.state == "user_stories_created"
    po = Step.objects.get(requirement=req, key="po_clarify")
    assert (po.state, po.runs) == ("done", 2)
    assert list(req.llm_calls.values_list("error", flat=True)) == ["LLMTransientError: 529 overloaded", "", ""]


def test_output_that_stays_invalid_fails_the_step_and_asks_a_human(alice, rita, scripted):
    for _ in range(3):
        scripted.enqueue({"verdict": "clear", "reasoning": "ok"})  # no summary, no objectives
    req = submit(alice)
    assert req.state == "received"  # not lost, not advanced
    step = Step.objects.get(requirement=req, key="po_clarify")
    assert step.state == "failed" and "still invalid after 2 repairs" in step.error
    task = pending(req, "step_failed")
    assert "po_clarify" in task.question
    assert req.llm_calls.count() == 3
    scripted.enqueue(PO_CLEAR).enqueue(BA_STORIES)
    decide(task, rita, "approve")
    assert fresh(req).state == "user_stories_created"


def test_a_repaired_answer_is_used(alice, scripted):
    scripted.enqueue({"verdict": "clear", "reasoning": "ok"}).enqueue(PO_CLEAR).enqueue(BA_STORIES)
    req = submit(alice)
    assert req.state == "user_stories_created"
    repair = scripted.requests[1].messages[-1]["content"][0]
    assert repair["type"] == "tool_result" and repair["is_error"] and "summary" in repair["content"]


def test_rejecting_a_failed_step_cancels_the_requirement(alice, rita, scripted):
    for _ in range(3):
        scripted.enqueue({"nonsense": True})
    req = submit(alice)
    decide(pending(req, "step_failed"), rita, "reject", reason="brief withdrawn")
    assert fresh(req).state == "cancelled"


def test_a_second_delivery_of_a_finished_step_does_nothing(alice):
    req = submit(alice)
    step = Step.objects.get(requirement=req, key="po_clarify")
    before = (req.transitions.count(), req.docs.count(), req.llm_calls.count())
    run_step.delay(step.pk)
    assert (req.transitions.count(), req.docs.count(), req.llm_calls.count()) == before


@pytest.fixture
def held_step(alice, monkeypatch):
    """A submitted requirement whose first step is queued but not yet delivered to any worker."""
    held = []
    monkeypatch.setattr(dispatch, "send_step", lambda step_id, key, countdown=None: held.append(step_id))
    submit(alice)
    monkeypatch.undo()
    return Step.objects.get(pk=held[0])


def test_a_write_from_a_superseded_lease_is_refused(held_step):
    stale = leases.step_claim(step_id=held_step.pk, worker="old")
    Step.objects.filter(pk=held_step.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    current = leases.step_claim(step_id=held_step.pk, worker="new")
    assert current.fence == stale.fence + 1
    with pytest.raises(StaleStep):
        product_owner_apply(lease=stale, output=ProductOwnerOutput.model_validate(PO_CLEAR))
    product_owner_apply(lease=current, output=ProductOwnerOutput.model_validate(PO_CLEAR))
    req = fresh(held_step.requirement)
    assert req.state != "received" and req.docs.count() == 1


def test_a_live_lease_turns_a_duplicate_delivery_away(held_step):
    assert leases.step_claim(step_id=held_step.pk, worker="first") is not None
    assert leases.step_claim(step_id=held_step.pk, worker="second") is None


def test_the_reaper_requeues_an_expired_lease_and_the_step_completes(held_step):
    lease = leases.step_claim(step_id=held_step.pk, worker="crashed")  # a worker that died holding the lease
    assert leases.steps_reap() == []
    Step.objects.filter(pk=held_step.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    assert leases.steps_reap() == [held_step.pk]
    assert fresh(held_step.requirement).state == "user_stories_created"
    with pytest.raises(StaleStep):
        product_owner_apply(lease=lease, output=ProductOwnerOutput.model_validate(PO_CLEAR))


def test_the_reaper_requeues_a_step_whose_message_was_lost(held_step, settings):
    settings.AITEAM_STEP_STALE_QUEUED_S = 0
    assert leases.steps_reap() == [held_step.pk]
    assert fresh(held_step.requirement).state == "user_stories_created"


def test_a_step_that_keeps_dying_goes_to_a_human(held_step, settings):
    settings.AITEAM_STEP_MAX_RUNS = 2
    for _ in range(2):
        leases.step_claim(step_id=held_step.pk, worker="dies")
        Step.objects.filter(pk=held_step.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    assert leases.step_claim(step_id=held_step.pk, worker="third") is None
    held_step.refresh_from_db()
    assert held_step.state == "failed" and "gave up after 2 runs" in held_step.error
    assert pending(held_step.requirement, "step_failed").context["step_id"] == held_step.pk
    (route,) = held_step.requirement.failure_routes.all()
    assert (route.route, route.step_id, route.facts["error_classes"]) == ("operator", held_step.pk, ["WorkerLost"])


def test_a_give_up_that_finds_the_requirement_ended_meanwhile_skips_the_step(held_step, settings):
    """The give-up runs after the claim, in a transaction of its own; a cancellation between the two wins."""
    settings.AITEAM_STEP_MAX_RUNS = 1
    Step.objects.filter(pk=held_step.pk).update(runs=1)
    type(held_step.requirement).objects.filter(pk=held_step.requirement_id).update(state="cancelled")
    leases._give_up(held_step.pk)
    held_step.refresh_from_db()
    assert (held_step.state, held_step.error) == ("skipped", "requirement is cancelled")
    assert not held_step.requirement.review_tasks.filter(kind="step_failed").exists()


def test_the_model_is_never_called_inside_a_database_transaction(alice, scripted, monkeypatch):
    from django.db import connection

    seen = []
    original = scripted.complete

    def watching(request):
        seen.append(connection.in_atomic_block)
        return original(request)

    monkeypatch.setattr(scripted, "complete", watching)
    scripted.enqueue(PO_CLEAR).enqueue(BA_STORIES)
    submit(alice)
    assert seen == [False, False]


def test_a_broker_that_cannot_size_the_queue_sends_the_step_through_the_broker_and_reconnects(monkeypatch):
    class Closing(inline.QueueSizer):
        closed = 0

        def waiting(self, queue):
            raise ConnectionError("broker gone")

        def close(self):
            Closing.closed += 1

    inline._queue_sizer.cache_clear()
    monkeypatch.setattr(inline, "QueueSizer", Closing)
    assert inline.queue_idle("llm") is False  # not idle: the next step keeps its broker hop
    assert Closing.closed == 1 and inline._queue_sizer.cache_info().currsize == 0  # released, rebuilt next time
    monkeypatch.undo()
    assert inline.queue_idle("llm") is True  # the embedded broker: an empty queue
    inline._queue_sizer.cache_clear()
    inline._idle_until.clear()


def test_an_idle_answer_is_trusted_briefly_and_a_busy_one_never(monkeypatch):
    class Counting(inline.QueueSizer):
        def __init__(self):
            self.asked, self.messages = 0, 0

        def waiting(self, queue):
            self.asked += 1
            return self.messages

    sizer, clock = Counting(), [100.0]
    monkeypatch.setattr(inline, "_queue_sizer", lambda: sizer)
    monkeypatch.setattr(inline.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(inline, "_idle_until", {})
    assert inline.queue_idle("llm") and inline.queue_idle("llm") and sizer.asked == 1  # the second answer is kept
    sizer.messages = 1  # a message arrives: within IDLE_FOR_S it is not seen yet
    assert inline.queue_idle("llm") and sizer.asked == 1
    assert not inline.queue_idle("sandbox") and not inline.queue_idle("sandbox") and sizer.asked == 3  # per queue
    clock[0] += inline.IDLE_FOR_S
    assert not inline.queue_idle("llm") and sizer.asked == 4  # asked again: busy, and a busy answer is not kept
    assert not inline.queue_idle("llm") and sizer.asked == 5


def test_a_step_failing_after_its_lease_was_taken_over_ends_quietly_and_leaves_the_new_holder_alone(
        held_step, scripted):
    """The old worker's model call fails after the reaper gave the step to another worker: routing that failure
    finds a stale lease. The old run ends without an error of its own and records nothing."""
    from types import SimpleNamespace

    from lifecycle import runner

    stale = leases.step_claim(step_id=held_step.pk, worker="old")
    Step.objects.filter(pk=held_step.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    current = leases.step_claim(step_id=held_step.pk, worker="new")
    scripted.enqueue(LLMTransientError("529 overloaded"))
    task = SimpleNamespace(request=SimpleNamespace(retries=0, is_eager=False), max_retries=3)
    assert runner._run_one(task, stale, worker="old", continues=False, delivered=True) is None
    step = Step.objects.get(pk=held_step.pk)
    assert (step.state, step.fence, step.worker) == ("running", current.fence, "new")
    assert not held_step.requirement.failure_routes.exists()


def test_a_failure_while_applying_output_fails_the_step_and_asks_a_human(alice, rita, scripted):
    clash = {"reasoning": "a file and a directory of the same name",
             "files": [{"path": "readinglist/x.py", "content": "x = 1\n"}, {"path": "readinglist/x.py/y.py", "content": ""}]}
    plan = answer("tech_lead", 1)  # T1 is planned to write both paths: a task writes only its planned files
    first = {**plan["tasks"][0], "files": [f["path"] for f in clash["files"]]}
    plan = {**plan, "tasks": [first, *plan["tasks"][1:]]}
    for item in (answer("product_owner"), answer("business_analyst"), answer("tech_architect"), answer("tech_lead", 0),
                 plan, clash):
        scripted.enqueue(item)
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    step = Step.objects.get(requirement=req, key="engineer:T1")
    assert step.state == "failed" and "while applying the output" in step.error
    failed_steps = {t.context["step"] for t in fresh(req).review_tasks.pending().filter(kind="step_failed")}
    assert "engineer:T1" in failed_steps  # (T2 fails too here: the scripted provider has no answer left for it)
    assert fresh(req).state == "in_development"
