"""Django's PostgreSQL backend, plus the pipeline that carries aiteam.db.write_behind's queued writes.

Queued writes go out in one psycopg pipeline with the next statement (any statement: a read must see them)
or with COMMIT, so a step's closing writes cost one round trip instead of one each. A rollback, or a
rollback to a savepoint, drops them: they were made after the last statement, hence after that savepoint.

A queued write that fails raises at the statement it went out with, which may belong to other code. Should
that code swallow the error, the transaction must still not commit what is left of it: a failed pipeline is
remembered, and COMMIT is refused (Django then rolls back and raises) unless a rollback to a savepoint that
was open when it failed has undone it.

BEGIN goes with the transaction's first statement too. psycopg, left to start transactions itself, sends BEGIN
in a round trip of its own (and syncs after it inside a pipeline), so the psycopg connection stays in
autocommit and this backend starts the transaction: when Django turns autocommit off, BEGIN is pending, and it
is sent at the head of the pipeline that carries the first statement (or the queued writes and COMMIT). A
transaction that runs no statement sends nothing at all. No statement may run before its BEGIN: the ones
Django runs pass through _send_queued_with, and the cursors' own methods (execute, executemany, copy, stream:
what reaches psycopg without Django's wrappers) send a pending BEGIN first, in a round trip of its own. In
Django's manual mode (autocommit off outside atomic) BEGIN is pending again after each COMMIT or ROLLBACK, as
psycopg would do; turning autocommit on or off with a transaction open is refused, as psycopg refuses it.
Server-side cursors are opened WITH HOLD only outside a transaction, as Django does (it asks psycopg).
"""
from __future__ import annotations

import psycopg
from django.db import DatabaseError
from django.db.backends.postgresql import base
from django.db.backends.utils import debug_transaction
from psycopg.pq import TransactionStatus

from aiteam.db.loaded import TransactionEpoch
from aiteam.db.write_behind import Write

IDLE = TransactionStatus.IDLE


class DatabaseWrapper(TransactionEpoch, base.DatabaseWrapper):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.write_behind: list[Write] = []
        self._failed_under: tuple[str, ...] | None = None  # the savepoints open when a pipeline failed
        self._begin_pending = False  # Django turned autocommit off and BEGIN has not been sent yet
        self.execute_wrappers.append(self._send_queued_with)

    def _send_queued_with(self, execute, sql, params, many, context):
        if sql.startswith("ROLLBACK TO SAVEPOINT"):
            self.write_behind.clear()
            if self._failed_under is not None and sql.split()[-1].strip('"') in self._failed_under:
                self._failed_under = None  # the failed writes were made after that savepoint: undone
            return execute(sql, params, many, context)
        if not self.write_behind and not self._begin_pending:
            return execute(sql, params, many, context)
        queued, self.write_behind = self.write_behind, []
        # A named cursor cannot join a pipeline; several commands in one string need the simple protocol.
        if params is None or isinstance(context["cursor"].cursor, psycopg.ServerCursor):
            self._pipelined(queued)
            return execute(sql, params, many, context)
        return self._pipelined(queued, lambda: execute(sql, params, many, context))

    def get_connection_params(self):
        params = super().get_connection_params()
        params["cursor_factory"] = _begin_first(params["cursor_factory"])
        return params

    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        connection.send_pending_begin = self._send_pending_begin  # for the cursors (_begin_first)
        return connection

    def create_cursor(self, name=None):
        cursor = super().create_cursor(name)
        if name:  # Django asks psycopg, which is always in autocommit here: WITH HOLD only outside a transaction
            cursor._withhold = self.get_autocommit()
        return cursor

    def _set_autocommit(self, autocommit):
        with self.wrap_database_errors:
            if self.connection.info.transaction_status != IDLE:  # what psycopg refuses too
                raise psycopg.ProgrammingError(f"can't change autocommit now: the connection is in transaction "
                                               f"status {self.connection.info.transaction_status.name}")
        if self.connection.autocommit is not True:  # a new connection: from now on, this backend sends BEGIN
            super()._set_autocommit(True)
        self._begin_pending = not autocommit

    def _send_pending_begin(self) -> None:
        if self._begin_pending:
            self._begin_pending = False
            self.connection.execute(self._begin_sql(), prepare=False)

    def _commit(self):
        if self._failed_under is not None:
            raise DatabaseError("COMMIT refused: a queued write of this transaction failed (see the error it "
                                "raised at the statement it was sent with)")
        try:
            if self._begin_pending and not self.write_behind and self.connection.info.transaction_status == IDLE:
                return None  # the transaction ran nothing: nothing to send
            if not self.write_behind or self.connection is None:
                return super()._commit()
            queued, self.write_behind = self.write_behind, []
            with debug_transaction(self, "COMMIT"):
                # COMMIT as one more statement of the pipeline: connection.commit() would sync on its own, and
                # leaving the pipeline syncs again (two round trips instead of one).
                self._pipelined(queued, lambda: self.connection.execute("COMMIT", prepare=False))
            return None
        finally:
            self._begin_pending = not self.autocommit  # Django's manual mode: the next statement begins anew

    def _pipelined(self, queued: list[Write], then=None):
        try:
            with self.wrap_database_errors, self.connection.pipeline():
                self._send_pending_begin()
                cursors = _send(self, queued)
                result = then() if then else None
        except BaseException:
            if queued:
                self._failed_under = tuple(self.savepoint_ids)  # cleared by a rollback that undoes the failure
            raise
        _finish(queued, cursors)
        return result

    def _begin_sql(self) -> str:
        """BEGIN as psycopg would send it, with the connection's isolation level and access mode, if set."""
        parts = ["BEGIN"]
        if self.connection.isolation_level is not None:
            parts.append("ISOLATION LEVEL " + self.connection.isolation_level.name.replace("_", " "))
        if self.connection.read_only is not None:
            parts.append("READ ONLY" if self.connection.read_only else "READ WRITE")
        if self.connection.deferrable is not None:
            parts.append("DEFERRABLE" if self.connection.deferrable else "NOT DEFERRABLE")
        return " ".join(parts)

    def _rollback(self):
        self.write_behind.clear()
        self._failed_under = None
        try:
            return super()._rollback()
        finally:
            self._begin_pending = not self.autocommit

    def _close(self):
        self.write_behind.clear()
        self._failed_under = None
        self._begin_pending = False
        return super()._close()


def _begin_first(cursor_class: type) -> type:
    """Django's psycopg cursor class, with the methods that run statements sending a pending BEGIN first."""

    class BeginFirst(cursor_class):
        def execute(self, *args, **kwargs):
            self._conn.send_pending_begin()
            return super().execute(*args, **kwargs)

        def executemany(self, *args, **kwargs):
            self._conn.send_pending_begin()
            return super().executemany(*args, **kwargs)

        def copy(self, *args, **kwargs):
            self._conn.send_pending_begin()
            return super().copy(*args, **kwargs)

        def stream(self, *args, **kwargs):
            self._conn.send_pending_begin()
            return super().stream(*args, **kwargs)

    BeginFirst.__name__ = BeginFirst.__qualname__ = f"BeginFirst{cursor_class.__name__}"
    return BeginFirst


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
