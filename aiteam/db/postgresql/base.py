"""Django's PostgreSQL backend, plus the pipeline that carries aiteam.db.write_behind's queued writes.

Queued writes go out in one psycopg pipeline with the next statement (any statement: a read must see them)
or with COMMIT, so a step's closing writes cost one round trip instead of one each. A rollback, or a
rollback to a savepoint, drops them: they were made after the last statement, hence after that savepoint.

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

from aiteam.db.loaded import TransactionEpoch
from aiteam.db.write_behind import Write


class DatabaseWrapper(TransactionEpoch, base.DatabaseWrapper):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.write_behind: list[Write] = []
        self._failed_under: tuple[str, ...] | None = None  # the savepoints open when a pipeline failed
        self.execute_wrappers.append(self._send_queued_with)

    def _send_queued_with(self, execute, sql, params, many, context):
        if sql.startswith("ROLLBACK TO SAVEPOINT"):
            self.write_behind.clear()
            if self._failed_under is not None and sql.split()[-1].strip('"') in self._failed_under:
                self._failed_under = None  # the failed writes were made after that savepoint: undone
            return execute(sql, params, many, context)
        if not self.write_behind:
            return execute(sql, params, many, context)
        queued, self.write_behind = self.write_behind, []
        # A named cursor cannot join a pipeline; several commands in one string need the simple protocol.
        if params is None or isinstance(context["cursor"].cursor, psycopg.ServerCursor):
            self._pipelined(queued)
            return execute(sql, params, many, context)
        return self._pipelined(queued, lambda: execute(sql, params, many, context))

    def _commit(self):
        if self._failed_under is not None:
            raise DatabaseError("COMMIT refused: a queued write of this transaction failed (see the error it "
                                "raised at the statement it was sent with)")
        if not self.write_behind or self.connection is None:
            return super()._commit()
        queued, self.write_behind = self.write_behind, []
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
        self._failed_under = None
        return super()._rollback()

    def _close(self):
        self.write_behind.clear()
        self._failed_under = None
        return super()._close()


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
