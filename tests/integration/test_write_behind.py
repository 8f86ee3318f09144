"""aiteam.db.write_behind on PostgreSQL (aiteam.db.postgresql): the same promises with writes queued and sent
in one pipeline with the next statement or COMMIT (tests/write_behind_cases.py), and that they are."""
import uuid

import psycopg
import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from psycopg.pq import TransactionStatus

from aiteam.db import write_behind
from lifecycle.models import OutboxEvent, Requirement, Step
from tests.write_behind_cases import CASES, _requirement


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__.removeprefix("check_"))
def test_write_behind(case, acme_project):
    case(acme_project)


@pytest.mark.django_db(transaction=True)
def test_writes_wait_for_the_next_statement_and_go_in_one_round_trip(acme_project, monkeypatch):
    requirement = _requirement(acme_project)
    pipelines = []
    real = type(connection.connection).pipeline
    monkeypatch.setattr(type(connection.connection), "pipeline", lambda self: pipelines.append(1) or real(self))
    with transaction.atomic():
        write_behind.insert(OutboxEvent(requirement=requirement, name="A"))
        write_behind.insert(OutboxEvent(requirement=requirement, name="B"))
        assert connection.write_behind and not pipelines  # queued, nothing sent yet
        assert OutboxEvent.objects.count() == 2  # sent with this read
        assert not connection.write_behind and len(pipelines) == 1
        write_behind.insert(OutboxEvent(requirement=requirement, name="C"))
    assert len(pipelines) == 2 and OutboxEvent.objects.count() == 3  # the last one went with COMMIT


@pytest.mark.django_db(transaction=True)
def test_queued_writes_and_commit_take_one_round_trip(acme_project, monkeypatch):
    """psycopg's commit() inside a pipeline syncs, and leaving the pipeline syncs again: COMMIT is sent as one
    more statement of the pipeline instead, and the writes and COMMIT cost one sync (the lock, with its BEGIN,
    another)."""
    requirement = _requirement(acme_project)
    syncs = _count_syncs(monkeypatch)
    with transaction.atomic():
        Requirement.objects.select_for_update().get(pk=requirement.pk)
        write_behind.insert(OutboxEvent(requirement=requirement, name="A"))
        write_behind.insert(OutboxEvent(requirement=requirement, name="B"))
    assert len(syncs) == 2
    assert connection.connection.pgconn.transaction_status == TransactionStatus.IDLE
    assert OutboxEvent.objects.filter(name__in=["A", "B"]).count() == 2
    with pytest.raises(IntegrityError), transaction.atomic():  # a deferred constraint fails at COMMIT: raised
        write_behind.insert(Step(requirement_id=uuid.uuid4(), key="k", attempt=1))
    assert connection.connection.pgconn.transaction_status == TransactionStatus.IDLE
    with transaction.atomic():
        write_behind.insert(OutboxEvent(requirement=requirement, name="C"))
    assert OutboxEvent.objects.filter(name="C").exists() and not Step.objects.exists()
    kept = list(connection.connection.pipeline_cursors)  # the pipelines' cursors are kept and used again
    for name in ("D", "E"):
        with transaction.atomic():
            write_behind.insert(OutboxEvent(requirement=requirement, name=name))
            write_behind.update(requirement, ["title"])
    assert connection.connection.pipeline_cursors == kept and OutboxEvent.objects.filter(name__in=["D", "E"]).count() == 2


@pytest.mark.django_db(transaction=True)
def test_begin_goes_with_the_transactions_first_statement(acme_project, monkeypatch):
    """psycopg syncs after the BEGIN it sends inside a pipeline (a round trip of its own): the backend's
    connection queues it with the statement that opens the transaction, and the transaction is still real."""
    requirement = _requirement(acme_project)
    commands = []
    real = psycopg.Connection._exec_command

    def exec_command(self, command, *args, **kwargs):
        commands.append((command, bool(self._pipeline)))
        return real(self, command, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "_exec_command", exec_command)
    syncs = _count_syncs(monkeypatch)
    with transaction.atomic():
        assert connection.connection.pgconn.transaction_status == TransactionStatus.IDLE  # nothing sent yet
        Requirement.objects.select_for_update().get(pk=requirement.pk)
        assert commands == [(b"BEGIN", True)] and len(syncs) == 1  # queued in the lock's pipeline, one sync
        assert connection.connection.pgconn.transaction_status == TransactionStatus.INTRANS
        with psycopg.connect(_url(), autocommit=True) as other, pytest.raises(psycopg.errors.LockNotAvailable):
            other.execute("SELECT 1 FROM lifecycle_requirement WHERE id = %s FOR UPDATE NOWAIT", [requirement.pk])
        Requirement.objects.filter(pk=requirement.pk).update(title="changed")
        with psycopg.connect(_url(), autocommit=True) as other:  # not committed yet: invisible elsewhere
            assert other.execute("SELECT title FROM lifecycle_requirement WHERE id = %s",
                                 [requirement.pk]).fetchone()[0] != "changed"
    assert Requirement.objects.get(pk=requirement.pk).title == "changed"
    with pytest.raises(RuntimeError), transaction.atomic():  # and a rollback undoes it
        Requirement.objects.filter(pk=requirement.pk).update(title="undone")
        raise RuntimeError
    assert Requirement.objects.get(pk=requirement.pk).title == "changed"


def _count_syncs(monkeypatch) -> list:
    from psycopg._pipeline_base import BasePipeline

    syncs = []
    real = BasePipeline._enqueue_sync
    monkeypatch.setattr(BasePipeline, "_enqueue_sync", lambda self: syncs.append(1) or real(self))
    return syncs


@pytest.mark.django_db(transaction=True)
def test_whatever_opens_the_transaction_runs_inside_it(acme_project):
    """A transaction's first statement, however it is sent: executemany, a server-side cursor (iterator()), a
    statement that fails in the driver before it is sent (the transaction goes on and commits)."""
    requirement = _requirement(acme_project)
    with pytest.raises(RuntimeError), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.executemany("UPDATE lifecycle_requirement SET title = %s WHERE id = %s",
                               [("one", requirement.pk), ("two", requirement.pk)])
        raise RuntimeError("undo it")
    assert Requirement.objects.get(pk=requirement.pk).title == "t"
    with transaction.atomic():
        assert [r.pk for r in Requirement.objects.select_for_update().filter(pk=requirement.pk).iterator(10)] == [
            requirement.pk]
        with psycopg.connect(_url(), autocommit=True) as other, pytest.raises(psycopg.errors.LockNotAvailable):
            other.execute("SELECT 1 FROM lifecycle_requirement WHERE id = %s FOR UPDATE NOWAIT", [requirement.pk])
    with transaction.atomic():
        with pytest.raises(DatabaseError):
            Requirement.objects.filter(title="NUL \x00 refused by the driver").exists()
        assert connection.connection.pgconn.transaction_status == TransactionStatus.INTRANS
        Requirement.objects.filter(pk=requirement.pk).update(title="after")
    assert Requirement.objects.get(pk=requirement.pk).title == "after"


def _url() -> str:
    params = connection.get_connection_params()
    return psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if k in (
        "dbname", "user", "password", "host", "port")})


@pytest.mark.django_db(transaction=True)
def test_a_read_at_commit_sees_every_write_and_holds_until_the_connection_runs_something(acme_project, monkeypatch):
    requirement = _requirement(acme_project)
    count = "SELECT COUNT(*) FROM lifecycle_outboxevent WHERE requirement_id = %s"
    assert write_behind.read_at_commit(count, [requirement.pk]) is None  # no transaction: read when needed
    with transaction.atomic():
        Requirement.objects.select_for_update().get(pk=requirement.pk)
        write_behind.insert(OutboxEvent(requirement=requirement, name="Queued"))
        read = write_behind.read_at_commit(count, [requirement.pk])
        OutboxEvent.objects.create(requirement=requirement, name="RunAfterIt")
        write_behind.insert(OutboxEvent(requirement=requirement, name="QueuedAfterIt"))
        assert read.row is None and not read.current
        syncs = _count_syncs(monkeypatch)
    assert len(syncs) == 1  # the last write, COMMIT and the read: one round trip
    assert read.row == (3,) and read.current
    OutboxEvent.objects.count()  # anything run since (an on-commit handler's statement, say)…
    assert not read.current  # …and the row is no longer taken as current

    read = _committed_with_read(count, requirement)
    with transaction.atomic():  # a transaction of queued writes only is a statement run too
        write_behind.insert(OutboxEvent(requirement=requirement, name="QueuedOnly"))
    assert read.row is not None and not read.current

    with pytest.raises(RuntimeError), transaction.atomic():
        rolled_back = write_behind.read_at_commit(count, [requirement.pk])
        raise RuntimeError
    assert rolled_back.row is None and not rolled_back.current  # never sent


@pytest.mark.django_db(transaction=True)
def test_a_read_after_commit_that_fails_leaves_the_transaction_committed(acme_project):
    requirement = _requirement(acme_project)
    with transaction.atomic():
        write_behind.insert(OutboxEvent(requirement=requirement, name="Kept"))
        broken = write_behind.read_at_commit("SELECT 1 / (COUNT(*) - COUNT(*)) FROM lifecycle_outboxevent", [])
        fine = write_behind.read_at_commit("SELECT COUNT(*) FROM lifecycle_outboxevent", [])
    assert OutboxEvent.objects.filter(name="Kept").exists()
    assert broken.row is None and not broken.current and fine.row is None  # no answer: the reader reads itself
    with transaction.atomic():  # nothing is held against the next transaction
        write_behind.insert(OutboxEvent(requirement=requirement, name="Next"))
    assert OutboxEvent.objects.filter(name="Next").exists()


def _committed_with_read(sql: str, requirement) -> write_behind.ReadAtCommit:
    with transaction.atomic():
        Requirement.objects.filter(pk=requirement.pk).exists()
        read = write_behind.read_at_commit(sql, [requirement.pk])
    assert read.current
    return read


@pytest.mark.django_db(transaction=True)
def test_a_failed_queued_write_is_never_committed_even_when_its_error_is_swallowed(acme_project):
    """The error comes out of whichever statement the write went with; code there that catches it must not
    leave the transaction able to commit the rest (server-side and client-side failures alike)."""
    requirement = _requirement(acme_project)
    with pytest.raises(DatabaseError, match="COMMIT refused"), transaction.atomic():
        write_behind.insert(OutboxEvent(requirement=requirement, name="Before"))
        write_behind.insert(Step(requirement=requirement, key="k", attempt=None))  # NOT NULL, in the server
        with pytest.raises(IntegrityError):
            Requirement.objects.filter(pk=requirement.pk).exists()  # someone else's read carries it, and is caught
    step = Step.objects.create(requirement=requirement, key="k", attempt=1)
    with pytest.raises(DatabaseError, match="COMMIT refused"), transaction.atomic():
        write_behind.insert(OutboxEvent(requirement=requirement, name="First"))
        step.error = "NUL \x00 refused by the driver"
        write_behind.update(step, ("error",))  # fails before it is sent: the writes after it never go
        write_behind.insert(OutboxEvent(requirement=requirement, name="Third"))
        with pytest.raises(DatabaseError):
            Requirement.objects.filter(pk=requirement.pk).exists()
    assert not OutboxEvent.objects.exists()
    with transaction.atomic():  # the connection is usable again
        write_behind.insert(OutboxEvent(requirement=requirement, name="Later"))
    assert list(OutboxEvent.objects.values_list("name", flat=True)) == ["Later"]


@pytest.mark.django_db(transaction=True)
def test_a_failure_undone_by_its_savepoint_leaves_the_transaction_committable(acme_project):
    requirement = _requirement(acme_project)
    with transaction.atomic():
        write_behind.insert(OutboxEvent(requirement=requirement, name="Outer"))
        with pytest.raises(IntegrityError), transaction.atomic():
            write_behind.insert(Step(requirement=requirement, key="k", attempt=None))
            Requirement.objects.filter(pk=requirement.pk).exists()
    assert list(OutboxEvent.objects.values_list("name", flat=True)) == ["Outer"]


@pytest.mark.django_db(transaction=True)
def test_several_commands_in_one_string_still_run_with_writes_queued(acme_project):
    requirement = _requirement(acme_project)
    with transaction.atomic():
        write_behind.insert(OutboxEvent(requirement=requirement, name="Queued"))
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1; SELECT 2")  # the simple protocol: sent after the queue, not in its pipeline
    assert OutboxEvent.objects.filter(name="Queued").exists()


XMIN = "SELECT xmin::text FROM lifecycle_requirement WHERE id = %s"
UNCHANGED = ("SELECT aiteam_expect_one(count(*)) FROM (SELECT 1 FROM lifecycle_requirement WHERE id = %s "
             "AND xmin = %s::xid FOR UPDATE) unchanged")


@pytest.mark.django_db(transaction=True)
def test_a_check_that_rows_are_unchanged_locks_them_and_goes_with_the_writes_and_commit(acme_project, monkeypatch):
    requirement = _requirement(acme_project)
    (xmin,) = connection.cursor().execute(XMIN, [requirement.pk]).fetchone()
    syncs = _count_syncs(monkeypatch)
    with transaction.atomic():
        write_behind.expect_unchanged(UNCHANGED, [requirement.pk, xmin])
        assert not syncs  # queued: nothing sent yet
        Step.objects.count()  # a read of another table: the check goes out first, in its pipeline
        assert len(syncs) == 1
        with psycopg.connect(_url(), autocommit=True) as other, pytest.raises(psycopg.errors.LockNotAvailable):
            other.execute("SELECT 1 FROM lifecycle_requirement WHERE id = %s FOR UPDATE NOWAIT", [requirement.pk])
        write_behind.insert(OutboxEvent(requirement=requirement, name="UnderTheCheck"))
    assert OutboxEvent.objects.filter(name="UnderTheCheck").exists()

    syncs.clear()
    (xmin,) = connection.cursor().execute(XMIN, [requirement.pk]).fetchone()
    with transaction.atomic():  # BEGIN, the check, the writes and COMMIT: one round trip
        write_behind.expect_unchanged(UNCHANGED, [requirement.pk, xmin])
        write_behind.insert(OutboxEvent(requirement=requirement, name="OneTrip"))
    assert len(syncs) == 1 and OutboxEvent.objects.filter(name="OneTrip").exists()


@pytest.mark.django_db(transaction=True)
def test_a_row_changed_since_it_was_read_fails_the_check_and_nothing_of_the_transaction_commits(acme_project):
    requirement = _requirement(acme_project)
    (xmin,) = connection.cursor().execute(XMIN, [requirement.pk]).fetchone()
    with psycopg.connect(_url(), autocommit=True) as other:  # another writer, after the read
        other.execute("UPDATE lifecycle_requirement SET title = 'theirs' WHERE id = %s", [requirement.pk])
    with pytest.raises(write_behind.RowsChanged), transaction.atomic():
        write_behind.expect_unchanged(UNCHANGED, [requirement.pk, xmin])
        write_behind.insert(OutboxEvent(requirement=requirement, name="Stale"))
        write_behind.update(Requirement(pk=requirement.pk, title="mine"), ["title"])
    assert not OutboxEvent.objects.filter(name="Stale").exists()
    assert Requirement.objects.get(pk=requirement.pk).title == "theirs"

    with pytest.raises(write_behind.RowsChanged), transaction.atomic():  # raised at the statement it went with
        write_behind.expect_unchanged(UNCHANGED, [requirement.pk, xmin])
        Requirement.objects.filter(pk=requirement.pk).update(title="mine")
    assert connection.connection.pgconn.transaction_status == TransactionStatus.IDLE  # rolled back
    assert Requirement.objects.get(pk=requirement.pk).title == "theirs"
    with pytest.raises(transaction.TransactionManagementError):  # it guards a transaction: outside one, refused
        write_behind.expect_unchanged(UNCHANGED, [requirement.pk, xmin])


@pytest.mark.django_db(transaction=True)
def test_a_check_waiting_on_a_writer_that_then_commits_fails(acme_project):
    """READ COMMITTED: the check waits for the lock another transaction holds; once that one commits its change,
    PostgreSQL evaluates the check on the row as changed, and it fails."""
    import threading
    import time

    requirement = _requirement(acme_project)
    (xmin,) = connection.cursor().execute(XMIN, [requirement.pk]).fetchone()
    other = psycopg.connect(_url())
    other.execute("UPDATE lifecycle_requirement SET title = 'theirs' WHERE id = %s", [requirement.pk])  # uncommitted
    committer = threading.Timer(0.5, other.commit)
    committer.start()
    started = time.monotonic()
    try:
        with pytest.raises(write_behind.RowsChanged), transaction.atomic():
            write_behind.expect_unchanged(UNCHANGED, [requirement.pk, xmin])
            write_behind.insert(OutboxEvent(requirement=requirement, name="AfterTheWait"))
        # it waited for the other transaction's COMMIT (its thread may not have returned from commit() yet)
        assert time.monotonic() - started >= 0.45
    finally:
        committer.join()
        other.close()
    assert not OutboxEvent.objects.filter(name="AfterTheWait").exists()
    assert Requirement.objects.get(pk=requirement.pk).title == "theirs"


@pytest.mark.django_db(transaction=True)
def test_values_passed_through_are_what_django_would_prepare(acme_project):
    """write_behind hands a str, bool, aware datetime, UUID or None to psycopg as it is, where Django's
    get_db_prep_save would return it unchanged; every other value (an int, JSON, a naive datetime, a str
    subclass) still goes through get_db_prep_save."""
    import datetime as dt
    import warnings

    from django.db import models
    from django.utils import timezone
    from psycopg.types.json import Jsonb

    from lifecycle.models import StateTransition
    from lifecycle.states import StepState

    requirement = _requirement(acme_project)
    now = timezone.now()
    rows = [
        StateTransition(requirement_id=requirement.pk, subject="requirement", subject_id=str(requirement.pk),
                        event="e", from_state="a", to_state="b", actor_role="r", actor_user=None, via="agent",
                        guard="", metadata={"step": "k"}, created_at=now),
        OutboxEvent(requirement=requirement, name="N", payload={"state": "x"}, sent_at=None),
        OutboxEvent(requirement=None, name="N", payload=[], sent_at=now.replace(tzinfo=None)),
        Step(requirement=requirement, key="k", attempt=2, state=StepState.RUNNING, fence=1, runs=1, worker="w",
             started_at=now, lease_expires_at=now + dt.timedelta(seconds=5), finished_at=None),
        requirement,
    ]

    def plain(value):
        return ("jsonb", value.obj) if isinstance(value, Jsonb) else (type(value).__name__, value)

    for row in rows:
        fields = tuple(f for f in write_behind._insert_fields(type(row)) if not getattr(f, "auto_now", False)
                       and not getattr(f, "auto_now_add", False))
        with warnings.catch_warnings():  # the naive datetime's warning, from both
            warnings.simplefilter("ignore", RuntimeWarning)
            mine = write_behind._values(row, fields, add=True, db=connection)
            theirs = tuple(f.get_db_prep_save(f.pre_save(row, True), connection) for f in fields)
        assert [plain(v) for v in mine] == [plain(v) for v in theirs], type(row).__name__
    fields = write_behind._insert_fields(Step)
    passing = dict(write_behind._preparation(fields, connection.vendor))  # what _values used above
    assert passing[Step._meta.get_field("key")] == {str}
    assert passing[Step._meta.get_field("requirement")] == {uuid.UUID, type(None)}
    assert passing[Step._meta.get_field("finished_at")] == {dt.datetime, type(None)}
    assert passing[Step._meta.get_field("attempt")] == frozenset()  # Django wraps ints for psycopg

    class Upper(models.CharField):  # prepares values its own way: never passed through
        def to_python(self, value):
            return value.upper() if isinstance(value, str) else value

    assert write_behind._passing(Upper(max_length=5)) == frozenset()
