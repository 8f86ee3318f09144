"""Reading one row by primary key through SQL the ORM compiled once.

`Model.objects.get(pk=…)` assembles a queryset, builds its WHERE clause and compiles the SQL on every call:
~0.4 ms of Python (2 vCPU EPYC) for a statement PostgreSQL answers in ~0.1 ms. The step path reads its
requirement by id first thing, often more than once (the run_step task, the agents' contexts and selectors,
the event handlers a step's outbox relay runs), so there rows are read by primary key here: the ORM compiles
each (model, fields) query once per database, and each call sends that SQL with the key and converts the row
as the ORM would (the fields' from_db_value converters, then `Model.from_db`, so aiteam.db.loaded's memory of
the loaded row still works).

Everywhere else (views, admin, services that lock, anything filtering on more than the key) the ORM reads.
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, models

M = TypeVar("M", bound=models.Model)


def get(model: type[M], pk: Any, *, using: str = DEFAULT_DB_ALIAS) -> M:
    """model.objects.get(pk=pk): every concrete field loaded; raises model.DoesNotExist."""
    attnames = tuple(f.attname for f in model._meta.concrete_fields)
    return model.from_db(using, list(attnames), _row(model, pk, attnames, using))


def values(model: type[models.Model], pk: Any, fields: Sequence[str], *, using: str = DEFAULT_DB_ALIAS) -> tuple:
    """model.objects.values_list(*fields).get(pk=pk), fields named as values_list names them (plain fields,
    "project_id", no lookups across relations); raises model.DoesNotExist."""
    return _row(model, pk, tuple(fields), using)


def _row(model: type[models.Model], pk: Any, fields: tuple[str, ...], using: str) -> tuple:
    connection = connections[using]
    sql, converters = _compiled(model, fields, using, connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(sql, [model._meta.pk.get_db_prep_value(pk, connection)])
        row = cursor.fetchone()
    if row is None:
        raise model.DoesNotExist(f"{model._meta.object_name} matching query does not exist.")
    return tuple(converted(row, converters, connection)) if converters else row


def converted(row: Sequence, converters: tuple, connection) -> list:
    """The row's values as the ORM hands them to a model: `converters` as SQLCompiler.get_converters gives them
    (position → (functions, expression)), applied in place of its results_iter."""
    row = list(row)
    for position, (functions, expression) in converters:
        for convert in functions:
            row[position] = convert(row[position], expression, connection)
    return row


@lru_cache(maxsize=128)
def _compiled(model: type[models.Model], fields: tuple[str, ...], using: str, vendor: str):
    """The SQL (one placeholder: the key) and the column converters, as the ORM builds them for this query."""
    placeholder = model._meta.pk.to_python(_PLACEHOLDERS.get(model._meta.pk.get_internal_type(), 0))
    # order_by(): as get() does, no ORDER BY (a model's default ordering could add joins or parameters)
    queryset = model._default_manager.using(using).filter(pk=placeholder).order_by().values_list(*fields)
    compiler = queryset.query.get_compiler(using)
    sql, params = compiler.as_sql()
    expected = model._meta.pk.get_db_prep_value(placeholder, connections[using])
    if len(compiler.select) != len(fields) or list(params) != [expected]:
        raise ValueError(f"{model.__name__} by {model._meta.pk.name} for {fields} does not compile to one "
                         f"key parameter (a default manager's own filter?): {params!r}")
    return sql, tuple(compiler.get_converters([column for column, _, _ in compiler.select]).items())


_PLACEHOLDERS = {"UUIDField": "00000000-0000-0000-0000-000000000000"}
