"""GET /healthz: can this web process do its work? The database answers, the broker answers, and no migration is
left unapplied. 200 or 503 with each check's outcome; no authentication, session or CSRF, for probes."""
from __future__ import annotations

import logging

from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from aiteam.celery import app

log = logging.getLogger(__name__)
OK = "ok"


@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": database_answers(), "broker": broker_answers()}
    checks["migrations"] = migrations_applied() if checks["database"] == OK else "not checked"
    healthy = all(outcome == OK for outcome in checks.values())
    return JsonResponse({"status": OK if healthy else "unavailable", **checks}, status=200 if healthy else 503)


def database_answers() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        log.warning("health: the database does not answer: %s", exc)
        return f"unavailable ({type(exc).__name__})"
    return OK


def broker_answers() -> str:
    """One connection attempt, no retry (the transport's connect timeout bounds it); eager mode's memory broker
    answers too."""
    try:
        with app.connection_for_write() as broker:
            broker.ensure_connection(max_retries=0)
    except Exception as exc:  # whatever stops the connection (refused, DNS, auth, a timeout) makes it unhealthy
        log.warning("health: the broker does not answer: %s", exc)
        return f"unavailable ({type(exc).__name__})"
    return OK


def migrations_applied() -> str:
    executor = MigrationExecutor(connection)
    unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return OK if not unapplied else f"{len(unapplied)} unapplied"
