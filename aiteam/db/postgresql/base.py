"""Django's PostgreSQL backend, plus the pipeline that carries aiteam.db.write_behind's queued writes.

Queued writes go out in one psycopg pipeline with the next statement (any statement: a read must see them)
or with COMMIT, so a step's closing writes cost one round trip instead of one each. A rollback, or a
rollback to a savepoint, drops them: they were made after the last statement, hence after that savepoint.

A transaction's first statement goes in a pipeline too, with the BEGIN that psycopg sends before it: psycopg
syncs after that BEGIN on its own (a round trip of its own), and the connection class below queues it instead,
so BEGIN and the statement that opens the transaction cost one round trip. psycopg keeps its own account of the
transaction (it sends BEGIN, COMMIT and ROLLBACK as before); only where BEGIN's answer is read changes.

A queued write that fails raises at the statement it went out with, which may belong to other code. Should
that code swallow the error, the transaction must still not commit what is left of it: a failed pipeline is
remembered, and COMMIT is refused (Django then rolls back and raises) unless a rollback to a savepoint that
was open when it failed has undone it.
"""
from __future__ import annotations

import psycopg
from django.db import DatabaseError
from django.db.backends.postgresql import base
from django.db.backends.utils import debug_transaction
from psycopg.pq import TransactionStatus

from aiteam.db.loaded import TransactionEpoch
from aiteam.db.write_behind import Write


class DatabaseWrapper(TransactionEpoch, base.DatabaseWrapper):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.write_behind: list[Write] = []
        self.reads_at_commit: list[Write] = []  # sent after the writes, in the COMMIT's pipeline
        self.statements_run = 0  # through Django's cursors: write_behind.ReadAtCommit asks whether any ran since
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
        return self._pipelined(queued, lambda: execute(sql, params, many, context))

    def _opens_transaction(self) -> bool:
        """Inside a transaction that has run nothing yet: psycopg sends BEGIN with this statement."""
        connection = self.connection
        return not connection.autocommit and connection.pgconn.transaction_status == TransactionStatus.IDLE

    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        connection.__class__ = BeginInPipeline  # a subclass adding one method: the instance is otherwise as made
        return connection

    def _commit(self):
        if self._failed_under is not None:
            raise DatabaseError("COMMIT refused: a queued write of this transaction failed (see the error it "
                                "raised at the statement it was sent with)")
        queued, self.write_behind, self.reads_at_commit = self.write_behind + self.reads_at_commit, [], []
        if not queued or self.connection is None:
            return super()._commit()
        with debug_transaction(self, "COMMIT"):
            # COMMIT as one more statement of the pipeline: connection.commit() would sync on its own, and
            # leaving the pipeline syncs again (two round trips instead of one).
            self._pipelined(queued, lambda: self.connection.execute("COMMIT", prepare=False))
        return None

    def _pipelined(self, queued: list[Write], then=None):
        try:
            with self.wrap_database_errors, self.connection.pipeline():
                cursors = _send(self, queued)
                result = then() if then else None
        except BaseException:
            self._failed_under = tuple(self.savepoint_ids)  # cleared by a rollback that undoes the failure
            raise
        _finish(queued, cursors)
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


class BeginInPipeline(psycopg.Connection):
    """psycopg's connection, except that inside a pipeline the BEGIN it sends before a transaction's first
    statement is queued with that statement; psycopg syncs after it, which costs a round trip of its own."""

    def _start_query(self):
        if self._pipeline and not self._autocommit and self.pgconn.transaction_status == TransactionStatus.IDLE:
            yield from self._exec_command(self._get_tx_start_command())  # in a pipeline: queued, read at its sync
            return
        yield from super()._start_query()


def _send(db: DatabaseWrapper, queued: list[Write]) -> list:
    cursors = []
    for write in queued:
        cursor = db.connection.cursor()
        cursor.execute(write.sql, write.params)
        cursors.append(cursor)
        if db.queries_logged:  # a test's query count and the debug log still see each write
            db.queries_log.append({"sql": f"{write.sql} /* pipelined */", "time": "0.000"})
    return cursors


def _finish(queued: list[Write], cursors: list) -> None:
    for write, cursor in zip(queued, cursors, strict=True):
        if write.done:  # an INSERT … RETURNING: its row, or None when ON CONFLICT DO NOTHING inserted none
            write.done(cursor.fetchone())
        cursor.close()
