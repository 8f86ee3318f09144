"""Writes that nothing reads back at once, sent with the transaction's next statement instead of alone.

A step's apply ends in a run of small writes — the audit row, the outbox event, the step marked done, the
next step — that each cost a round trip to PostgreSQL. Inside a transaction on the pipelining backend
(aiteam.db.postgresql) `insert` and `update` queue their statement; the backend sends what is queued in one
pipeline together with the next statement the connection runs, or with COMMIT. Any statement flushes the queue
first, so every read in the transaction sees every write before it; a rollback drops what is queued with the
rest. Elsewhere (SQLite, autocommit, outside a transaction) the same statement runs at once.

A read can ride along too, where its answer is wanted only once the transaction has committed: read_at_commit
sends it in the COMMIT's pipeline, right after the COMMIT. And a check, where rows read before the transaction
must still be as read: expect_unchanged locks them and fails the transaction (RowsChanged) when they are not,
so a transaction of such a check, queued writes and COMMIT costs one round trip.

The statements are built here from the model's fields (no save() signals; aiteam registers none); the values
are taken when the call is made, as an immediate write would take them.
"""
from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections, models
from django.db.transaction import TransactionManagementError

from aiteam.db import loaded

Done = Callable[[tuple | None], None]
CHANGED = "AIT01"  # the SQLSTATE aiteam_expect_one raises (lifecycle migration 0013)


@dataclass(frozen=True)
class Write:
    sql: str
    params: tuple
    done: Done | None = None  # for a statement with RETURNING: called with its row (None when it returned none)


def insert(obj: models.Model) -> None:
    """INSERT the new instance; its primary key is set when the statement has run."""
    _insert(obj, once=False)


def insert_once(obj: models.Model) -> None:
    """INSERT unless a unique constraint already holds such a row (ON CONFLICT DO NOTHING), queued like `insert`:
    once it has run, obj.pk is set if the row was inserted and stays None if it existed. A conflict leaves no
    aborted transaction to recover from, so no savepoint is needed."""
    _insert(obj, once=True)


def _insert(obj: models.Model, *, once: bool) -> None:
    db = _db()
    model = type(obj)
    _submit(Write(_insert_sql(model, once), _values(obj, _insert_fields(model), add=True, db=db),
                  lambda row: _inserted(obj, row, db.alias)), db)


def update(obj: models.Model, fields: Iterable[str]) -> None:
    """UPDATE these fields of a saved instance (the row exists: the caller holds its lock)."""
    fields = tuple(fields)
    meta = obj._meta
    model_fields = tuple(meta.get_field(name) for name in fields)
    db = _db()
    params = (*_values(obj, model_fields, add=False, db=db), meta.pk.get_db_prep_value(obj.pk, db))
    _submit(Write(_update_sql(type(obj), fields), params), db)
    loaded.remember(obj, (f.attname for f in model_fields))


def save(obj: models.Model) -> None:
    """What obj.save() does for a row that exists, queued like `update`; a new instance is saved at once.
    save() writes every concrete field; this writes those that changed since the row was loaded or saved in
    this transaction (aiteam.db.loaded; every field when that is not known)."""
    if obj._state.adding:
        obj.save()
        return
    deferred = obj.get_deferred_fields()  # like save(): fields never loaded are not written (nor fetched)
    fields = loaded.changed(obj, [name for name, attname in _update_fields(type(obj)) if attname not in deferred])
    if fields:
        update(obj, fields)


class RowsChanged(DatabaseError):
    """A check queued by expect_unchanged found its rows changed since they were read. The transaction cannot
    commit: leaving its atomic block rolls it back."""


def expect_unchanged(sql: str, params: Iterable) -> None:
    """Inside a transaction, on PostgreSQL: queue a check that locks rows read before the transaction and fails
    it with RowsChanged unless they are still as read. `sql` selects aiteam_expect_one(count(*)) over the rows
    FOR UPDATE, filtered by what was read (their xmin, which every change of a row changes). Queued like a write,
    it goes out with the transaction's next statement or its COMMIT, before any write queued after it: those
    writes are made under its lock, and a failed check stops them and the COMMIT in the same pipeline."""
    db = _db()
    if not db.in_atomic_block or db.vendor != "postgresql":
        raise TransactionManagementError("expect_unchanged needs a transaction on PostgreSQL")
    _submit(Write(sql, tuple(params)), db)


class ReadAtCommit:
    """A read sent in the COMMIT's pipeline, after the COMMIT: it sees everything its transaction wrote. Its row
    holds only while the connection has run nothing since: once any statement has (an on-commit handler that
    may have changed what was read, say), `current` is False and the caller reads again. It is False too when
    the read could not be made (no answer came); a read that found no row is current with `row` None."""

    def __init__(self, sql: str, params: tuple) -> None:
        self.write = Write(sql, params, self._arrived)
        self.row: tuple | None = None
        self._mark: tuple[object, int] | None = None  # the connection and its statement count when the row came

    def _arrived(self, row: tuple | None) -> None:
        db = _db()
        self.row, self._mark = row, (db, db.statements_run)

    @property
    def current(self) -> bool:
        db = _db()
        return self._mark == (db, db.statements_run)

    def part(self, start: int, stop: int | None = None) -> ReadPart:
        """The columns [start:stop] of this read's row, as a read of their own: two readers' statements joined
        in one (SELECT * FROM (a) CROSS JOIN (b)) cost one statement after COMMIT, not two."""
        return ReadPart(self, slice(start, stop))


class ReadPart:
    """Some of a ReadAtCommit's columns; `row` and `current` as the whole read's."""

    def __init__(self, read: ReadAtCommit, columns: slice) -> None:
        self.read, self.columns = read, columns

    @property
    def row(self) -> tuple | None:
        return None if self.read.row is None else self.read.row[self.columns]

    @property
    def current(self) -> bool:
        return self.read.current


def read_at_commit(sql: str, params: Iterable) -> ReadAtCommit | None:
    """Queue a read for this transaction's COMMIT; None where that cannot be done (no pipelining backend, or
    no transaction): the caller reads when it needs the answer."""
    db = _db()
    reads = getattr(db, "reads_at_commit", None)
    if reads is None or not db.in_atomic_block:
        return None
    read = ReadAtCommit(sql, tuple(params))
    reads.append(read.write)
    return read


@lru_cache(maxsize=64)
def _update_fields(model: type[models.Model]) -> tuple[tuple[str, str], ...]:
    """(name, attname) of the fields an UPDATE writes; deferred fields are named by attname ("project_id")."""
    return tuple((f.name, f.attname) for f in model._meta.local_concrete_fields if not f.primary_key)


def _submit(write: Write, db) -> None:
    queue = getattr(db, "write_behind", None)
    if queue is not None and db.in_atomic_block:
        queue.append(write)
        return
    row = _run_now(write, db)
    if write.done:
        write.done(row)


def _run_now(write: Write, db) -> tuple | None:
    with db.cursor() as cursor:  # the backend's wrapper sends anything queued in the same pipeline
        cursor.execute(write.sql, write.params)
        return cursor.fetchone() if cursor.description else None


def _inserted(obj: models.Model, row: tuple | None, alias: str) -> None:
    if row is not None:
        obj.pk = row[0]
        obj._state.adding, obj._state.db = False, alias


def _values(obj: models.Model, fields: tuple[models.Field, ...], *, add: bool, db=None) -> tuple:
    db = db or _db()
    out = []
    for field, passes in _preparation(fields, db.vendor):
        value = field.pre_save(obj, add)
        if type(value) in passes and (type(value) is not datetime or value.utcoffset() is not None):
            out.append(value)  # what get_db_prep_save would return (see _passing)
        else:
            out.append(field.get_db_prep_save(_now(value), db))
    return tuple(out)


@lru_cache(maxsize=256)
def _preparation(fields: tuple[models.Field, ...], vendor: str) -> tuple[tuple[models.Field, frozenset], ...]:
    return tuple((field, _passing(field) if vendor == "postgresql" else frozenset()) for field in fields)


def _passing(field: models.Field) -> frozenset:
    """The value types this field's get_db_prep_save hands to PostgreSQL unchanged: a str for a text field, a
    bool, an aware datetime, a UUID, None where the field is nullable, and for a foreign key what its target
    field passes, and None. Decided from the field class's own methods being Django's, so a field that prepares
    values its own way (or an int, which Django wraps for psycopg) takes get_db_prep_save. Preparing a step's
    writes value by value through the field methods cost ~25-35 us a row."""
    cls = type(field)
    if isinstance(field, models.ForeignKey):
        if cls.get_db_prep_save is not models.ForeignKey.get_db_prep_save:
            return frozenset()
        return _passing(field.target_field) | {type(None)}  # a ForeignKey saves None as None, null or not
    if cls.get_db_prep_save is not models.Field.get_db_prep_save:
        return frozenset()
    methods = (cls.get_prep_value, cls.get_db_prep_value, cls.to_python)
    base = {models.CharField: {str}, models.TextField: {str}, models.BooleanField: {bool},
            models.DateTimeField: {datetime},  # aware only (checked per value): a naive one is made aware, warned
            models.UUIDField: {uuid.UUID}}
    passes = next((types for django_field, types in base.items()
                   if methods == (django_field.get_prep_value, django_field.get_db_prep_value, django_field.to_python)),
                  None)
    if passes is None:
        return frozenset()
    return frozenset(passes | ({type(None)} if field.null else set()))


def _db():
    """The default database's wrapper itself: `django.db.connection` is a proxy that looks the wrapper up again
    on every attribute, and the field methods called per value touch it several times each."""
    return connections[DEFAULT_DB_ALIAS]


def _now(value):
    """The value as it is at the call: a JSON value is serialised only when sent, so a dict or list the
    caller changes afterwards is copied (the write must not pick the change up)."""
    return copy.deepcopy(value) if isinstance(value, dict | list) else value


@lru_cache(maxsize=64)
def _insert_fields(model: type[models.Model]) -> tuple[models.Field, ...]:
    return tuple(f for f in model._meta.local_concrete_fields if not f.db_returning)


@lru_cache(maxsize=64)
def _insert_sql(model: type[models.Model], once: bool) -> str:
    quote, meta = connection.ops.quote_name, model._meta
    fields = _insert_fields(model)
    conflict = " ON CONFLICT DO NOTHING" if once else ""
    return (f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
            f"VALUES ({', '.join(['%s'] * len(fields))}){conflict} RETURNING {quote(meta.pk.column)}")


@lru_cache(maxsize=256)
def _update_sql(model: type[models.Model], fields: tuple[str, ...]) -> str:
    quote, meta = connection.ops.quote_name, model._meta
    assignments = ", ".join(f"{quote(meta.get_field(name).column)} = %s" for name in fields)
    return f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s"
