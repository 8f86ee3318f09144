"""Step bookkeeping: schedule, claim with a lease, finish under a fence, release, fail, reap.

Celery with Redis delivers at least once, and a hard-killed worker's message comes back
only after the visibility timeout. The Step row is therefore the record: a claim takes a
lease and bumps the fence; a write is accepted only with the current fence while the step
is still running; the reaper re-queues steps whose lease expired or whose message was lost.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import lru_cache

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.transaction import TransactionManagementError
from django.utils import timezone
from kombu.exceptions import ChannelError

from aiteam.db import by_pk, write_behind
from lifecycle.errors import StaleStep
from lifecycle.models import Requirement, Step
from lifecycle.states import TERMINAL_STATES, StepState

log = logging.getLogger("aiteam.progress")
PO_CLARIFY = "po_clarify"
BA_STORIES = "ba_stories"
ARCHITECT = "architect_spec"
DESIGN_REVIEW = "tl_design_review"
PLAN = "tl_plan"
ENGINEER = "engineer"  # one step per plan task: "engineer:T1"
FIX = "engineer_fix"
SELF_TEST = "self_test"
CODE_REVIEW = "tl_code_review"
QC_TESTS = "qc_tests"
QC_RUN = "qc_run"
DEVOPS = "devops"
DELIVER = "deliver"
ROLE_OF_STEP = {
    PO_CLARIFY: "product_owner", BA_STORIES: "business_analyst", ARCHITECT: "tech_architect",
    DESIGN_REVIEW: "tech_lead", PLAN: "tech_lead", ENGINEER: "senior_engineer", FIX: "senior_engineer",
    SELF_TEST: "sandbox", CODE_REVIEW: "tech_lead", QC_TESTS: "qc_engineer", QC_RUN: "sandbox",
    DEVOPS: "devops_engineer", DELIVER: "delivery",
}
SANDBOX_STEPS = {SELF_TEST, QC_RUN}
DEFAULT_QUEUE_STEPS = {DELIVER}


def kind_of(key: str) -> str:
    """The step's kind: "engineer:T1" → "engineer"."""
    return key.split(":", 1)[0]


def queue_for(key: str) -> str:
    kind = kind_of(key)
    return "sandbox" if kind in SANDBOX_STEPS else "default" if kind in DEFAULT_QUEUE_STEPS else "llm"


Budget = write_behind.ReadAtCommit | write_behind.ReadPart  # a step's budget snapshot, read with a COMMIT


@dataclass(frozen=True)
class Lease:
    step_id: int
    fence: int
    requirement_id: object
    key: str
    attempt: int
    # the step's budget snapshot, read with the COMMIT that claimed it (inline or step_claim; _reads_at_commit);
    # None: the budget check reads it when the step starts
    budget: Budget | None = field(default=None, compare=False, repr=False)
    # the step's row and its requirement's as that COMMIT left them, read with it too (with their xmin):
    # lock_at_commit applies on them; None: it locks them as lock_for_apply does
    rows: write_behind.ReadPart | None = field(default=None, compare=False, repr=False)

    def locking(self) -> Lease:
        """This lease without its snapshot rows: lock_at_commit locks and reads them at once (lock_for_apply)."""
        return replace(self, rows=None)

    @property
    def role(self) -> str:
        return ROLE_OF_STEP[kind_of(self.key)]

    @property
    def kind(self) -> str:
        return kind_of(self.key)

    @property
    def task_key(self) -> str:
        """The plan task an engineer step builds ("T1"), or ""."""
        return self.key.partition(":")[2]


def step_schedule(*, requirement_id, key: str, attempt: int) -> None:
    """Create the step row once and queue it after commit; scheduling it again is harmless (nothing happens).

    The INSERT goes out with the transaction's next statement or with its COMMIT (aiteam.db.write_behind), so
    a step's closing writes, the next step and COMMIT cost one round trip. Inside a worker's inline slot (see
    inline_slot) the first new step on the slot's queue, when nothing else waits on that queue, is created
    already claimed by this worker and run next without a broker hop.
    """
    slot = _inline_candidate(key)
    step = Step(requirement_id=requirement_id, key=key, attempt=attempt, **(slot.claim_fields() if slot else {}))
    write_behind.insert_once(step)  # step.pk stays None when (requirement, key, attempt) exists
    if slot:
        slot.reserve(step)
    else:
        # robust: a broker hiccup must not undo or fail the caller; the reaper re-sends lost steps
        transaction.on_commit(lambda: _enqueue_new(step), robust=True)


def _enqueue_new(step: Step) -> None:
    if step.pk is not None:  # inserted by this transaction (an existing row is already on its way)
        enqueue(step.pk, queue_for(step.key))


def enqueue(step_id: int, queue: str = "llm") -> None:
    from agents.tasks import run_step  # the task module is the one glue point between the apps

    run_step.apply_async((step_id,), queue=queue)


class InlineSlot:
    """Room for one step a worker runs next, in the same task, instead of sending it through the broker.

    The step row is inserted already claimed (running, fence 1, a fresh lease) in the scheduling transaction;
    the slot hands its lease over only once that transaction commits. A worker that dies before running it
    leaves a running step whose lease expires: the reaper re-queues it, as for any other step.
    """

    def __init__(self, *, queue: str, worker: str, rows_for: Callable[[str], bool] = lambda key: False) -> None:
        self.queue, self.worker = queue, worker
        self.rows_for = rows_for  # whether a step of this key is applied at commit: then its rows are read too
        self.reserved = False
        self.lease: Lease | None = None
        self.budget: Budget | None = None
        self.rows: write_behind.ReadPart | None = None

    def claim_fields(self) -> dict:
        now = timezone.now()
        return {"state": StepState.RUNNING, "fence": 1, "runs": 1, "worker": self.worker, "started_at": now,
                "lease_expires_at": now + timedelta(seconds=settings.STEP_TIMEOUTS.lease)}

    def reserve(self, step: Step) -> None:
        """Hold the slot for this step; its lease is handed over once the transaction that inserts it commits
        (the slot stays empty if the row already existed: that step is someone else's). The step's budget
        snapshot and its rows (for lock_at_commit) are read with that COMMIT: its budget check and its apply's
        lock cost no round trip of their own."""
        self.reserved = True
        self.rows, self.budget = _reads_at_commit(step, self.rows_for)
        transaction.on_commit(lambda: self._hand_over(step))

    def _hand_over(self, step: Step) -> None:
        if step.pk is None:
            return
        self.lease = Lease(step.pk, step.fence, step.requirement_id, step.key, step.attempt, budget=self.budget,
                           rows=self.rows)
        log.info("step %s of %s started inline in %s", step, step.requirement_id, self.worker)

    def clear(self) -> None:
        """Empty again, for an apply run a second time (the first one's transaction rolled back)."""
        self.reserved, self.lease, self.budget, self.rows = False, None, None, None


def _reads_at_commit(step: Step, rows_for: Callable[[str], bool]) -> tuple[write_behind.ReadPart | None, Budget | None]:
    """Queue what a step claimed in this transaction starts from, read with its COMMIT (write_behind.read_at_commit):
    its budget snapshot and, for a step applied at commit (rows_for), its row and its requirement's with their
    xmin (for lock_at_commit), in one read. Returns (rows, budget), None where it cannot be read so."""
    from lifecycle.services import budgets  # budgets builds on this module

    if not rows_for(step.key):
        return None, budgets.snapshot_at_commit(step)
    budget_sql, budget_params = budgets.snapshot_statement(step)
    read = write_behind.read_at_commit(
        f"SELECT * FROM ({_rows_query()}) step_rows CROSS JOIN ({budget_sql}) budget",
        (Requirement._meta.pk.get_db_prep_value(step.requirement_id, connections[DEFAULT_DB_ALIAS]),
         step.key, step.attempt, *budget_params))
    if read is None:
        return None, None
    width = len(_attnames(Step)) + len(_attnames(Requirement)) + 2  # and the two rows' xmin
    return read.part(0, width), read.part(width)


_slot: ContextVar[InlineSlot | None] = ContextVar("inline_slot", default=None)


@contextmanager
def inline_slot(*, queue: str, worker: str, rows_for: Callable[[str], bool] = lambda key: False) -> Iterator[InlineSlot]:
    slot = InlineSlot(queue=queue, worker=worker, rows_for=rows_for)
    token = _slot.set(slot)
    try:
        yield slot
    finally:
        _slot.reset(token)


def _inline_candidate(key: str) -> InlineSlot | None:
    slot = _slot.get()
    if slot is None or slot.reserved or queue_for(key) != slot.queue:
        return None
    return slot if queue_idle(slot.queue) else None


IDLE_FOR_S = 0.02  # how long an "idle" answer is trusted: a chain of fast steps asks at most this often


def queue_idle(queue: str) -> bool:
    """Nothing waits on the broker queue: running the next step here takes no work from another worker.

    An idle answer is trusted for IDLE_FOR_S: a chain of millisecond steps asks Redis every few steps instead
    of every step (0.14 ms of a ~2 ms step), so a message that arrives meanwhile waits at most that long
    longer. Steps that call a model take seconds; they ask every time."""
    if _idle_until.get(queue, 0.0) > time.monotonic():
        return True
    try:
        idle = _queue_sizer().waiting(queue) == 0
        if idle:
            _idle_until[queue] = time.monotonic() + IDLE_FOR_S
        return idle
    except ChannelError:  # the broker has no such queue: nothing waits on it
        return True
    except Exception:  # a broker hiccup: send through the broker as usual, and reconnect next time
        log.debug("could not size queue %s", queue, exc_info=True)
        if _queue_sizer.cache_info().currsize:  # connected once: release that connection before the next try
            _queue_sizer().close()
            _queue_sizer.cache_clear()
        return False


class QueueSizer:
    """How many messages wait on a queue, through one broker connection per process (connecting each time costs
    more than the step). On Redis, one pipeline of LLEN over the queue's priority lists on one client: kombu's
    passive declare builds a client and makes two round trips per call, ~0.3 ms of a fast step."""

    def __init__(self) -> None:
        from aiteam.celery import app

        self.connection = app.connection_for_read()
        self.channel = self.connection.default_channel
        redis = hasattr(self.channel, "_q_for_pri")  # kombu's Redis transport
        self.client = self.channel._create_client() if redis else None  # honours the transport's global_keyprefix

    def waiting(self, queue: str) -> int:
        if self.client is None:  # another transport: its passive declare counts the messages
            return self.channel.queue_declare(queue=queue, passive=True).message_count
        pipe = self.client.pipeline(transaction=False)
        for priority in self.channel.priority_steps:
            pipe.llen(self.channel._q_for_pri(queue, priority))
        return sum(pipe.execute())

    def close(self) -> None:
        try:
            self.connection.release()
        except Exception:  # already broken: nothing left to release
            log.debug("closing the queue sizer's broker connection failed", exc_info=True)


_idle_until: dict[str, float] = {}  # queue → until when its last idle answer holds (per process)


@lru_cache(maxsize=1)
def _queue_sizer() -> QueueSizer:
    return QueueSizer()


def step_claim(*, step_id: int, worker: str, rows_for: Callable[[str], bool] = lambda key: False) -> Lease | None:
    """Take the lease on a step, or return None when there is nothing to do for this delivery. The lease comes
    with what the step starts from, read with the claim's COMMIT (_reads_at_commit): its budget snapshot and, for
    a step applied at commit (rows_for), its rows, so that its budget check, its input and its apply's lock cost
    no round trip of their own, as for a step claimed inline."""
    with transaction.atomic():
        # of=self: lock the step only; the requirement row is read, not locked (its writers lock it themselves)
        try:
            step = _step_and_requirement_for_update(step_id, of=_STEP_ONLY)
        except Step.DoesNotExist:
            log.warning("step %s no longer exists (its requirement was deleted); dropping the message", step_id)
            return None
        now = timezone.now()
        verdict = _claim_verdict(step, now)
        if verdict == _SKIP:
            _close(step, StepState.SKIPPED, f"requirement is {step.requirement.state}")
        elif verdict == _CLAIM:
            step.state, step.worker = StepState.RUNNING, worker
            step.fence += 1
            step.runs += 1
            step.started_at = now
            step.lease_expires_at = now + timedelta(seconds=settings.STEP_TIMEOUTS.lease)
            write_behind.update(step, ("state", "worker", "fence", "runs", "started_at", "lease_expires_at"))
            rows, budget = _reads_at_commit(step, rows_for)
    if verdict == _GIVE_UP:
        _give_up(step_id)  # in a transaction of its own, locking the requirement first
    if verdict != _CLAIM:
        return None
    log.info("step %s of %s started (run %d)", step, step.requirement_id, step.runs)
    return Lease(step.pk, step.fence, step.requirement_id, step.key, step.attempt, budget=budget, rows=rows)


_CLAIM, _NOTHING, _SKIP, _GIVE_UP = "claim", "nothing", "skip", "give up"


def _claim_verdict(step: Step, now) -> str:
    """What a delivery of the step (its row and its requirement's as read) comes to."""
    if step.state in (StepState.DONE, StepState.FAILED, StepState.SKIPPED):
        return _NOTHING
    if step.state == StepState.RUNNING and step.lease_expires_at and step.lease_expires_at > now:
        return _NOTHING  # a live worker holds it (a duplicate delivery)
    if step.requirement.state in TERMINAL_STATES:
        return _SKIP
    return _GIVE_UP if step.runs >= settings.AITEAM_STEP_MAX_RUNS else _CLAIM


def _give_up(step_id: int) -> None:
    """A step whose runs are used up (its workers kept dying) fails, is routed, and a step_failed task asks an
    operator; in a transaction of its own that locks the requirement, then the step (_REQUIREMENT_FIRST), since
    opening the task locks the requirement, and the claim held the step only. Checked again under those locks."""
    from lifecycle.services import failures

    with transaction.atomic():
        try:
            step = _step_and_requirement_for_update(step_id, of=_REQUIREMENT_FIRST)
        except Step.DoesNotExist:
            return
        verdict = _claim_verdict(step, timezone.now())
        if verdict == _SKIP:  # the requirement ended meanwhile
            _close(step, StepState.SKIPPED, f"requirement is {step.requirement.state}")
        if verdict != _GIVE_UP:
            return  # or another delivery or an operator got there first
        _close(step, StepState.FAILED, f"gave up after {step.runs} runs: {step.error}")
        _route_given_up(step)
        failures.open_step_failed_task(step)


def _route_given_up(step: Step) -> None:
    """A step whose runs all ended without an outcome (its workers kept dying): routed like any failure."""
    from lifecycle.failure_rules import Failure, Source, classify
    from lifecycle.services.routing import failure_route_record

    failure = Failure(Source.STEP, kind_of(step.key), ("WorkerLost",), error=step.error[:1000])
    failure_route_record(requirement=step.requirement, failure=failure, routing=classify(failure), step=step,
                         summary=step.error, action="step failed: a step_failed review task asks an operator")


def lock_fenced(lease: Lease) -> Step:
    """Inside a transaction: lock the step and refuse the write unless this lease is current."""
    return _fenced(Step.objects.select_for_update().get(pk=lease.step_id), lease)


def lock_for_apply(lease: Lease) -> tuple[Step, Requirement]:
    """Inside a transaction: lock_fenced and requirement_for_update in one statement (both rows locked, the
    requirement first: see _REQUIREMENT_FIRST)."""
    step = _fenced(_step_and_requirement_for_update(lease.step_id, of=_REQUIREMENT_FIRST), lease)
    return step, step.requirement


def lock_at_commit(lease: Lease) -> tuple[Step, Requirement]:
    """lock_for_apply without a round trip of its own, for an apply whose every effect is in this database: the
    step and its requirement as the lease's snapshot has them (read with the COMMIT that claimed
    it). The transaction's first statement to go out (at the latest its COMMIT) locks both rows and checks that
    neither changed since (write_behind.expect_unchanged, on their xmin), before any write of the apply; if one
    did, the transaction fails with RowsChanged and nothing of it commits, and the caller applies again on a
    lease without the snapshot (agents.tasks does, for a StepSpec marked at_commit). An apply that commits to a
    workspace or calls out must hold the lock before it does so: it uses lock_for_apply. Without a snapshot, or
    called in a nested atomic block (not the apply's own transaction), this is lock_for_apply."""
    db = connections[DEFAULT_DB_ALIAS]
    snapshot = lease.rows.row if lease.rows is not None else None
    if snapshot is None or db.savepoint_ids:  # in a nested block, a rollback to its savepoint would drop the check
        return lock_for_apply(lease)
    step = _fenced(_step_and_requirement(snapshot[:-2], db), lease)
    write_behind.expect_unchanged(_unchanged_sql(), (step.pk, snapshot[-2], snapshot[-1]))
    return step, step.requirement


_STEP_ONLY = ("self",)  # select_for_update(of=…): the step's row only, its requirement read unlocked
# Both rows, the requirement's first: PostgreSQL locks a row of each table in the order FOR UPDATE OF names them
# (without OF, in FROM's order: the step's first). Review decisions lock the requirement, then a step (a failed
# step's retry, parked steps); an apply arriving with a stale lease used to lock that step, then wait for the
# requirement, and PostgreSQL killed one of the two (tests/integration/test_lock_order.py).
_REQUIREMENT_FIRST = ("requirement", "self")


def _step_and_requirement_for_update(step_id: int, of: tuple[str, ...]) -> Step:
    """Step.objects.select_for_update(of=of).select_related("requirement").get(pk=step_id), compiled once: every
    step's apply runs it (both rows locked) and every claim (the step's only), and assembling its SQL took
    longer than the database took to answer it (a claim's ~1.7 ms of CPU, warm, on the 2-vCPU EPYC)."""
    db = connections[DEFAULT_DB_ALIAS]  # the wrapper itself: the `connection` proxy looks it up on every use
    if not db.in_atomic_block:  # what the ORM checks when it compiles select_for_update
        raise TransactionManagementError("select_for_update cannot be used outside of a transaction.")
    sql = _lock_query(of)
    with db.cursor() as cursor:
        cursor.execute(sql, [step_id])
        row = cursor.fetchone()
    if row is None:
        raise Step.DoesNotExist(f"step {step_id} does not exist")
    return _step_and_requirement(row, db)


def requirement_values(lease: Lease, fields: tuple[str, ...]) -> tuple:
    """The requirement's fields (attnames) for a step's input: as the lease's snapshot has them when the step came
    with its rows (applied at commit: read with the COMMIT that claimed it; no query), else read by primary key.
    The snapshot is used even when something has run on the connection since (its `current` is not asked): a
    step's input is a moment's picture either way, and what its apply writes is checked against the rows as they
    are then."""
    snapshot = lease.rows.row if lease.rows is not None else None
    if snapshot is None:
        return by_pk.values(Requirement, lease.requirement_id, fields)
    converters, offset = dict(_row_converters()), len(_attnames(Step))
    db, out = connections[DEFAULT_DB_ALIAS], []
    for position in (offset + _attnames(Requirement).index(name) for name in fields):
        value = snapshot[position]
        functions, expression = converters.get(position, ((), None))
        for convert in functions:
            value = convert(value, expression, db)
        out.append(value)
    return tuple(out)


def _step_and_requirement(row: tuple, db) -> Step:
    """A row of the apply lock's columns as a step with its requirement cached on it."""
    row = by_pk.converted(row, _row_converters(), db)
    step_fields, requirement_fields = _attnames(Step), _attnames(Requirement)
    step = Step.from_db(db.alias, step_fields, row[:len(step_fields)])
    requirement = Requirement.from_db(db.alias, requirement_fields, row[len(step_fields):])
    Step.requirement.field.set_cached_value(step, requirement)
    return step


@lru_cache(maxsize=2)
def _attnames(model) -> tuple[str, ...]:
    return tuple(f.attname for f in model._meta.concrete_fields)


@lru_cache(maxsize=4)
def _lock_query(of: tuple[str, ...]) -> str:
    """The SQL: the step's columns, then its requirement's, as the ORM orders them (converted by _row_converters),
    locking the rows `of` names, in that order."""
    compiler = Step.objects.select_for_update(of=of).select_related("requirement").filter(pk=0).query.get_compiler(
        connection.alias)
    sql, params = compiler.as_sql()
    assert list(params) == [0] and len(compiler.select) == len(Step._meta.concrete_fields) + len(
        Requirement._meta.concrete_fields), "the ORM's select_related layout changed"
    return sql


@lru_cache(maxsize=1)
def _row_converters() -> tuple:
    """The converters of the apply lock's columns (the same without FOR UPDATE, which the ORM compiles only in a
    transaction): for the lock's rows and the snapshot's, which has the same columns in the same order."""
    compiler = Step.objects.select_related("requirement").filter(pk=0).query.get_compiler(connection.alias)
    compiler.as_sql()  # lays the select out
    assert len(compiler.select) == len(_attnames(Step)) + len(_attnames(Requirement)), "the layout changed"
    return tuple(compiler.get_converters([column for column, _, _ in compiler.select]).items())


@lru_cache(maxsize=1)
def _rows_query() -> str:
    """The apply lock's columns, unlocked, then each row's xmin, for the step (requirement, key, attempt)."""
    step, requirement, _, pk, requirement_id = _tables()
    columns = [f"{step}.{connection.ops.quote_name(f.column)}" for f in Step._meta.concrete_fields]
    columns += [f"{requirement}.{connection.ops.quote_name(f.column)}" for f in Requirement._meta.concrete_fields]
    return (f"SELECT {', '.join(columns)}, {step}.xmin::text, {requirement}.xmin::text FROM {step} "
            f"JOIN {requirement} ON {requirement}.{pk} = {step}.{requirement_id} WHERE {step}.{requirement_id} = %s "
            f"AND {step}.{connection.ops.quote_name('key')} = %s AND {step}.{connection.ops.quote_name('attempt')} = %s")


@lru_cache(maxsize=1)
def _unchanged_sql() -> str:
    """Lock the requirement and its step (in that order: _REQUIREMENT_FIRST); fail unless both still have the
    xmin they were read with."""
    step, requirement, step_pk, pk, requirement_id = _tables()
    return (f"SELECT aiteam_expect_one(count(*)) FROM (SELECT 1 FROM {step} JOIN {requirement} "
            f"ON {requirement}.{pk} = {step}.{requirement_id} WHERE {step}.{step_pk} = %s AND {step}.xmin = %s::xid "
            f"AND {requirement}.xmin = %s::xid FOR UPDATE OF {requirement}, {step}) unchanged")


def _tables() -> tuple[str, ...]:
    """The step and requirement tables, their primary keys and the step's requirement column, quoted."""
    quote = connection.ops.quote_name
    return (quote(Step._meta.db_table), quote(Requirement._meta.db_table), quote(Step._meta.pk.column),
            quote(Requirement._meta.pk.column), quote(Step._meta.get_field("requirement").column))


def _fenced(step: Step, lease: Lease) -> Step:
    if step.state != StepState.RUNNING or step.fence != lease.fence:
        raise StaleStep(f"step {step} has fence {step.fence}/{step.state}; write with fence {lease.fence} refused")
    return step


def step_finish(step: Step) -> None:
    """Mark a locked, fenced step done (called inside the service that applies its output)."""
    _close(step, StepState.DONE, "")
    log.info("step %s of %s done", step, step.requirement_id)


def step_release(lease: Lease, *, error: str, retry_in_s: float = 0) -> None:
    """Give the lease back after a transient failure. `enqueued_at` is set to when the retry is due, so the
    reaper does not treat a step waiting out its backoff as a lost message and send it early."""
    with transaction.atomic():
        step = lock_fenced(lease)
        step.state, step.lease_expires_at, step.error = StepState.QUEUED, None, error[:4000]
        step.enqueued_at = timezone.now() + timedelta(seconds=retry_in_s)
        step.save()


def step_fail(lease: Lease, *, error: str) -> None:
    """A permanent failure: the step stops, a human is asked; the requirement keeps its state."""
    from lifecycle.services import failures

    with transaction.atomic():
        step, _ = lock_for_apply(lease)  # the requirement first: opening the task locks it
        _close(step, StepState.FAILED, error)
        failures.open_step_failed_task(step)


def step_skip(lease: Lease, *, reason: str) -> None:
    """The requirement moved on (cancelled, or another path) while the step ran: nothing to apply."""
    with transaction.atomic():
        _close(lock_fenced(lease), StepState.SKIPPED, reason)


def step_retry_by_human(step: Step) -> None:
    """A reviewer chose to run a failed step again: fresh run budget, queued after commit."""
    step.state, step.runs, step.error, step.lease_expires_at = StepState.QUEUED, 0, "", None
    step.enqueued_at = timezone.now()
    step.save()
    transaction.on_commit(lambda: enqueue(step.pk, queue_for(step.key)), robust=True)


def steps_reap(now=None) -> list[int]:
    """Re-queue steps whose lease expired or whose queue message seems lost; returns their ids."""
    now = now or timezone.now()
    stale_queued = now - timedelta(seconds=settings.AITEAM_STEP_STALE_QUEUED_S)
    expired = Step.objects.filter(state=StepState.RUNNING, lease_expires_at__lt=now)
    lost = Step.objects.filter(state=StepState.QUEUED, enqueued_at__lt=stale_queued)
    requeued = []
    for step in list(expired[:500]) + list(lost[:500]):
        # Conditional update: of two reapers, only the one that changes the row re-queues it.
        claimed = Step.objects.filter(pk=step.pk, state=step.state, fence=step.fence, enqueued_at=step.enqueued_at)
        if claimed.update(state=StepState.QUEUED, lease_expires_at=None, enqueued_at=now) == 1:
            log.warning("reaper: re-queuing %s of %s (was %s)", step, step.requirement_id, step.state)
            requeued.append(step.pk)
            enqueue(step.pk, queue_for(step.key))
    return requeued


def _close(step: Step, state: str, error: str) -> None:
    step.state, step.error, step.finished_at, step.lease_expires_at = state, error[:4000], timezone.now(), None
    write_behind.update(step, ("state", "error", "finished_at", "lease_expires_at"))


def requirement_for_update(lease: Lease) -> Requirement:
    return Requirement.objects.select_for_update().get(pk=lease.requirement_id)
