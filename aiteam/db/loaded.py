"""What a row held when this transaction last read or wrote it, so write_behind.save writes only what changed.

Django's save() rewrites every column. For a requirement that is 25 columns on every transition — its 2 KB
brief (which PostgreSQL compresses again each time) and four JSON values among them — where a transition
changes two. A model with the RemembersLoaded mixin keeps the values it was loaded with (and updates them when
it is saved); write_behind.save then writes only the fields whose value differs.

The remembered values are trusted only in the transaction that took them, and only until a rollback: the
backend's TransactionEpoch changes when a transaction begins or commits and at every rollback, full or to a
savepoint; epochs are unique in the process, so an instance handed to another thread's connection is not
trusted either.
Otherwise — outside a transaction, in a later one, after a rollback — every field is written, as save() does.
A JSON dict or list is remembered as a deep copy, so one changed in place no longer equals what was
remembered and is written; any other value that can change in place unseen is always written, as is any
field whose pre_save sets the value (auto_now).

What it cannot see: another path (a queryset update, a second instance of the row) changing a column in the
same transaction, after which this instance sets that column back to the value it loaded; that write is
skipped. aiteam's services change a locked row through one instance.
"""
from __future__ import annotations

import copy
import datetime
import decimal
import itertools
import uuid
from collections.abc import Iterable
from functools import lru_cache

from django.db import connections, models

# Values of these types cannot change in place: equal to the remembered value means the column holds it.
IMMUTABLE = frozenset({str, int, bool, float, decimal.Decimal, uuid.UUID, datetime.datetime, datetime.date,
                       datetime.time, datetime.timedelta, bytes, type(None)})
_JSON = frozenset({dict, list})  # remembered as deep copies, so comparing them says whether they changed
_COMPARABLE = IMMUTABLE | _JSON
_MISSING = object()


_EPOCHS = itertools.count(1)  # process-wide: no two connections (threads) ever share an epoch


class TransactionEpoch:
    """DatabaseWrapper mixin: `tx_epoch` changes when a transaction begins or commits and at every rollback
    (Django's manual mode begins the next transaction at COMMIT or ROLLBACK, without set_autocommit)."""

    tx_epoch = 0

    def set_autocommit(self, autocommit, force_begin_transaction_with_broken_autocommit=False):
        self.tx_epoch = next(_EPOCHS)
        return super().set_autocommit(autocommit, force_begin_transaction_with_broken_autocommit)

    def commit(self):
        self.tx_epoch = next(_EPOCHS)
        return super().commit()

    def _rollback(self):
        self.tx_epoch = next(_EPOCHS)
        return super()._rollback()

    def _savepoint_rollback(self, sid):
        self.tx_epoch = next(_EPOCHS)
        return super()._savepoint_rollback(sid)


class RemembersLoaded:
    """Model mixin: remember the values loaded and saved, for write_behind.save (see the module)."""

    @classmethod
    def from_db(cls, db, field_names, values):
        obj = super().from_db(db, field_names, values)
        remember(obj, field_names)
        return obj

    def save(self, *args, **kwargs) -> None:
        super().save(*args, **kwargs)
        names = kwargs.get("update_fields")
        if args:  # Django's deprecated positional form: which fields it wrote is not worth guessing
            forget(self)
        else:
            remember(self, _attnames(type(self), names) if names is not None else _loaded_attnames(self))

    def refresh_from_db(self, using=None, fields=None, from_queryset=None) -> None:
        super().refresh_from_db(using=using, fields=fields, from_queryset=from_queryset)
        if fields is not None:
            remember(self, _attnames(type(self), fields))
        elif from_queryset is None:
            remember(self, _loaded_attnames(self))
        else:  # the queryset may load part of the row (only(), defer()): which part is not worth guessing
            forget(self)


def remember(obj: models.Model, attnames: Iterable[str]) -> None:
    """The row now holds these attributes' current values (no-op for a model without the mixin)."""
    if not isinstance(obj, RemembersLoaded):
        return
    epoch = getattr(connections[obj._state.db or "default"], "tx_epoch", None)
    if epoch is None:
        return
    taken = obj.__dict__.get("_loaded")
    if taken is None or taken[0] != epoch:  # taken in another transaction, or before a rollback: start over
        taken = obj.__dict__["_loaded"] = (epoch, {})
    values = taken[1]
    for attname in attnames:
        value = obj.__dict__.get(attname, _MISSING)
        # a JSON dict or list is remembered as a copy: changed in place later, it no longer equals it
        values[attname] = copy.deepcopy(value) if type(value) in _JSON else value


def forget(obj: models.Model) -> None:
    """Until the next load or save, every field is written."""
    obj.__dict__.pop("_loaded", None)


def changed(obj: models.Model, names: list[str]) -> list[str]:
    """Of these field names, those whose value may differ from the row's (all of them without a trusted memory)."""
    taken = obj.__dict__.get("_loaded")
    if taken is None or not _trusted(obj, taken[0]):
        return names
    values, fields = taken[1], _fields(type(obj))
    out = []
    for name in names:
        attname, always = fields[name]
        new, old = obj.__dict__.get(attname, _MISSING), values.get(attname, _MISSING)
        if always or old is _MISSING or type(new) is not type(old) or type(new) not in _COMPARABLE or new != old:
            out.append(name)
    return out


def _trusted(obj: models.Model, epoch: int) -> bool:
    connection = connections[obj._state.db or "default"]
    return connection.in_atomic_block and getattr(connection, "tx_epoch", None) == epoch


@lru_cache(maxsize=32)
def _fields(model: type[models.Model]) -> dict[str, tuple[str, bool]]:
    """field name → (attname, always written)."""
    return {f.name: (f.attname, bool(getattr(f, "auto_now", False))) for f in model._meta.concrete_fields}


def _attnames(model: type[models.Model], names: Iterable[str]) -> list[str]:
    fields = _fields(model)
    return [fields[name][0] if name in fields else name for name in names]


def _loaded_attnames(obj: models.Model) -> list[str]:
    deferred = obj.get_deferred_fields()
    return [f.attname for f in obj._meta.concrete_fields if f.attname not in deferred]
