"""Tests of a data migration: the database taken to a migration, its models as they were there, and back to the
latest migrations afterwards (a later migration's tables, dropped going back, are there again for the tests that
run after on the same database)."""
from __future__ import annotations

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(target: list[tuple[str, str]]) -> Apps:
    """The database at `target`; the models as they were there."""
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def migrate_to_latest() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
