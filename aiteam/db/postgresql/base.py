"""Django's PostgreSQL backend, plus the pipeline that carries aiteam.db.write_behind's queued writes.

Queued writes go out in one psycopg pipeline with the next statement (any statement: a read must see them)
or with COMMIT, so a step's closing writes cost one round trip instead of one each. A rollback, or a
rollback to a savepoint, drops them: they were made after the last statement, hence after that savepoint.
Reads queued for COMMIT (write_behind.read_at_commit) go in its pipeline after it; one queued inside a
savepoint that is rolled back is still sent, and its answer left unused.

A transaction's first statement goes in a pipeline too, with the BEGIN that psycopg sends before it: psycopg
syncs after a BEGIN sent inside a pipeline (a round trip of its own), and the connection class below queues
it instead, in this backend's own pipelines only (they read nothing before their sync, so the BEGIN's answer
is there before anything could ask for a second one). psycopg keeps its own account of the transaction: it
sends BEGIN, COMMIT and ROLLBACK as before; only where BEGIN's answer is read changes.

Timestamps are loaded by psycopg's own loader (its C one in psycopg's binary build) with the time zone put
in place as Django's loader does: Django's is a subclass of psycopg's pure-Python loader, ~2.5 against
~0.8 µs a value, and a step's rows hold four.

A check queued by write_behind.expect_unchanged fails with SQLSTATE AIT01 when its rows changed since they
were read; it is raised as write_behind.RowsChanged, wherever it surfaced.

A queued write that fails raises at the statement it went out with, which may belong to other code. Should
that code swallow the error, the transaction must still not commit what is left of it: a failed pipeline that
carried queued writes is remembered, and COMMIT is refused (Django then rolls back and raises) unless a
rollback to a savepoint that was open when it failed has undone it.
"""
from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Sequence
from functools import lru_cache

import psycopg
from django.db import DatabaseError
from django.db.backends.postgresql import base
from django.db.backends.utils import debug_transaction
from psycopg.abc import AdaptContext, Buffer, PQGen
from psycopg.adapt import Loader
from psycopg.pq import Format, TransactionStatus

from aiteam.db.loaded import TransactionEpoch
from aiteam.db.write_behind import CHANGED, RowsChanged, Write

log = logging.getLogger(__name__)


class DatabaseWrapper(TransactionEpoch, base.DatabaseWrapper):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.write_behind: list[Write] = []
        self.reads_at_commit: list[Write] = []  # sent after COMMIT, in its pipeline
        self.statements_run = 0  # every statement sent: write_behind.ReadAtCommit asks whether any ran since
        self._failed_under: tuple[str, ...] | None = None  # the savepoints open when a pipeline failed
        self.execute_wrappers.append(self._send_queued_with)

    def _send_queued_with(self, execute, sql, params, many, context):
        self.statements_run += 1
        if sql.startswith("ROLLBACK TO SAVEPOINT"):
            self.write_behind.clear()
            if self._failed_under is not None and sql.split()[-1].strip('"') in self._failed_under:
                self._failed_under = None  # the failed writes were made after that savepoint: undone
            return execute(sql, params, many, context)
        if not self.write_behind and not self._opens_transaction():
            return execute(sql, params, many, context)
        queued, self.write_behind = self.write_behind, []
        # A named cursor cannot join a pipeline; several commands in one string need the simple protocol.
        if params is None or isinstance(context["cursor"].cursor, psycopg.ServerCursor):
            if queued:
                self._pipelined(queued)
            return execute(sql, params, many, context)
        return self._pipelined(queued, lambda cursors: execute(sql, params, many, context))

    def _opens_transaction(self) -> bool:
        """Inside a transaction that has run nothing yet: psycopg sends BEGIN before the next statement."""
        connection = self.connection
        return not connection.autocommit and connection.pgconn.transaction_status == TransactionStatus.IDLE

    def get_new_connection(self, conn_params) -> psycopg.Connection:
        connection = super().get_new_connection(conn_params)
        connection.__class__ = BeginInPipeline  # a subclass adding one method: the instance is otherwise as made
        # Django's create_cursor keeps the loader when its `timezone` is the connection's, as this one's is
        connection.adapters.register_loader(base.TIMESTAMPTZ_OID, tz_loader(self.timezone))
        return connection

    def _commit(self):
        if self._failed_under is not None:
            raise DatabaseError("COMMIT refused: a queued write of this transaction failed (see the error it "
                                "raised at the statement it was sent with)")
        queued, self.write_behind = self.write_behind, []
        reads, self.reads_at_commit = self.reads_at_commit, []
        if not (queued or reads) or self.connection is None:
            return super()._commit()
        with debug_transaction(self, "COMMIT"):
            # COMMIT as one more statement of the pipeline: connection.commit() would sync on its own, and
            # leaving the pipeline syncs again (two round trips instead of one).
            self._pipelined(queued, lambda cursors: cursors.take().execute("COMMIT", prepare=False),
                            reads_after=reads)
        return None

    def _pipelined(self, queued: Sequence[Write], then: Callable | None = None, *, reads_after: Sequence[Write] = ()):
        """Send the queued writes, then `then(cursors)` (a statement, or COMMIT), then `reads_after`, in one
        pipeline. A read after COMMIT that fails leaves the commit done: its answer is simply not there (its
        reader reads again when it needs it)."""
        result, cursors, read_cursors, pool = None, [], [], _Cursors(self.connection)
        self.statements_run += len(queued) + len(reads_after)
        try:
            with self.wrap_database_errors, self.connection.pipeline():
                self.connection.begin_queued = self._opens_transaction()
                _send(self, queued, cursors, pool)
                result = then(pool) if then else None
                _send(self, reads_after, read_cursors, pool)
        except BaseException as exc:
            if not (isinstance(exc, Exception) and reads_after and _committed(result)):
                if queued:  # the error may surface in, and be swallowed by, code that did not queue them
                    self._failed_under = tuple(self.savepoint_ids)  # cleared by a rollback that undoes it
                if getattr(exc.__cause__, "sqlstate", None) == CHANGED:  # an expect_unchanged check failed
                    raise RowsChanged(str(exc.__cause__).splitlines()[0]) from exc
                raise
            log.warning("a read sent after COMMIT failed; the transaction is committed", exc_info=True)
        finally:
            self.connection.begin_queued = False
        _finish(queued, cursors)
        _finish(reads_after[:len(read_cursors)], read_cursors)
        return result

    def _rollback(self):
        self.write_behind.clear()
        self.reads_at_commit.clear()
        self._failed_under = None
        return super()._rollback()

    def _close(self):
        self.write_behind.clear()
        self.reads_at_commit.clear()
        self._failed_under = None
        return super()._close()


@lru_cache(maxsize=8)
def tz_loader(tz: datetime.tzinfo | None) -> type[Loader]:
    """A timestamptz loader that gives what Django's gives (the value in the connection's time zone, which Django
    sets to `tz`, with `tz` as its tzinfo; None: naive) through psycopg's default text loader, which its binary
    build implements in C. Django's own subclasses psycopg's pure-Python class, which psycopg cannot swap."""
    native = psycopg.adapters.get_loader(base.TIMESTAMPTZ_OID, Format.TEXT)

    class TzLoader(Loader):
        timezone = tz

        def __init__(self, oid: int, context: AdaptContext | None = None) -> None:
            super().__init__(oid, context)
            self._load = native(oid, context).load

        def load(self, data: Buffer) -> datetime.datetime:
            return self._load(data).replace(tzinfo=tz)

    return TzLoader


class BeginInPipeline(psycopg.Connection):
    """psycopg's connection, except that the BEGIN it sends before a transaction's first statement is queued
    without a sync when DatabaseWrapper._pipelined asks for it (`begin_queued`): psycopg syncs after a BEGIN in
    a pipeline so that a fetch inside the pipeline cannot see the transaction as not begun and send a second
    one; _pipelined fetches nothing before its sync."""

    begin_queued = False
    pipeline_cursors: list | None = None  # kept for DatabaseWrapper's pipelines (_Cursors)

    def _start_query(self) -> PQGen[None]:
        if self.begin_queued and self._pipeline:
            self.begin_queued = False  # once: the statement it goes with is the transaction's first
            yield from self._exec_command(self._get_tx_start_command())  # queued; its answer comes at the sync
            return
        yield from super()._start_query()


def _committed(commit_cursor) -> bool:
    return commit_cursor is not None and commit_cursor.statusmessage == "COMMIT"


def _send(db: DatabaseWrapper, queued: Sequence[Write], cursors: list, pool: _Cursors) -> None:
    for write in queued:
        cursor = pool.take() if write.done else pool.shared()
        cursors.append(cursor)
        cursor.execute(write.sql, write.params)
        if db.queries_logged:  # a test's query count and the debug log still see each write
            db.queries_log.append({"sql": f"{write.sql} /* pipelined */", "time": "0.000"})


class _Cursors:
    """The cursors of one pipeline: one for each statement whose result is read, one for all the others. They are
    the connection's, kept from pipeline to pipeline: making a psycopg cursor cost more than sending a statement,
    and a used one has its parameter types' dumpers at hand."""

    def __init__(self, connection: BeginInPipeline) -> None:
        self.connection, self.taken, self._shared = connection, 0, None
        if connection.pipeline_cursors is None:
            connection.pipeline_cursors = []

    def take(self) -> psycopg.Cursor:
        spare = self.connection.pipeline_cursors
        if self.taken == len(spare):
            spare.append(self.connection.cursor())
        self.taken += 1
        return spare[self.taken - 1]

    def shared(self) -> psycopg.Cursor:
        self._shared = self._shared or self.take()
        return self._shared


def _finish(queued: Sequence[Write], cursors: list) -> None:
    """Hand each statement's row to its `done` (an INSERT … RETURNING's, None when ON CONFLICT inserted none;
    a read's); a statement that has no result (it failed, or was skipped after a failure) gets no call."""
    for write, cursor in zip(queued, cursors, strict=True):
        if write.done and cursor.pgresult is not None:
            write.done(cursor.fetchone())
