"""Django's PostgreSQL backend, plus the pipeline that carries aiteam.db.write_behind's queued writes.

Queued writes go out in one psycopg pipeline with the next statement (any statement: a read must see them)
or with COMMIT, so a step's closing writes cost one round trip instead of one each. A rollback, or a
rollback to a savepoint, drops them: they were made after the last statement, hence after that savepoint.
"""
from __future__ import annotations

import psycopg
from django.db.backends.postgresql import base

from aiteam.db.write_behind import Write


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.write_behind: list[Write] = []
        self.execute_wrappers.append(self._send_queued_with)

    def _send_queued_with(self, execute, sql, params, many, context):
        if not self.write_behind:
            return execute(sql, params, many, context)
        if sql.startswith("ROLLBACK TO SAVEPOINT"):
            self.write_behind.clear()
            return execute(sql, params, many, context)
        queued, self.write_behind = self.write_behind, []
        if isinstance(context["cursor"].cursor, psycopg.ServerCursor):  # a named cursor cannot join a pipeline
            self._send_alone(queued)
            return execute(sql, params, many, context)
        with self.wrap_database_errors, self.connection.pipeline():
            cursors = _send(self, queued)
            result = execute(sql, params, many, context)
        _finish(queued, cursors)
        return result

    def _send_alone(self, queued: list[Write]) -> None:
        with self.wrap_database_errors, self.connection.pipeline():
            cursors = _send(self, queued)
        _finish(queued, cursors)

    def _commit(self):
        if not self.write_behind or self.connection is None:
            return super()._commit()
        queued, self.write_behind = self.write_behind, []
        with self.wrap_database_errors, self.connection.pipeline():
            cursors = _send(self, queued)
            self.connection.commit()
        _finish(queued, cursors)
        return None

    def _rollback(self):
        self.write_behind.clear()
        return super()._rollback()

    def _close(self):
        self.write_behind.clear()
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
        if write.done:
            write.done(cursor.fetchone() if cursor.description else None)
        cursor.close()
