"""GET /healthz: what an orchestrator's probe sees when the database, the broker or the migrations are not right."""
import socket

import pytest
from django.db import OperationalError, connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client

pytestmark = pytest.mark.django_db


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens once the probe is closed


def test_it_answers_200_when_the_database_the_broker_and_the_migrations_are_fine():
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok", "migrations": "ok"}


def test_it_needs_no_login_session_or_csrf_token_and_is_never_cached():
    client = Client(enforce_csrf_checks=True)
    response = client.get("/healthz")
    assert response.status_code == 200 and not response.cookies
    assert "no-cache" in response["Cache-Control"]
    assert client.head("/healthz").status_code == 200


def test_a_migration_left_unapplied_answers_503():
    executor = MigrationExecutor(connection)
    (app, name), = executor.loader.graph.leaf_nodes("lifecycle")
    MigrationRecorder(connection).record_unapplied(app, name)
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "database": "ok", "broker": "ok", "migrations": "1 unapplied"}


def test_a_database_that_does_not_answer_answers_503(monkeypatch):
    class Unreachable:
        def cursor(self):
            raise OperationalError("connection refused")

    monkeypatch.setattr("aiteam.health.connection", Unreachable())
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "database": "unavailable (OperationalError)", "broker": "ok",
                               "migrations": "not checked"}


def test_a_broker_that_does_not_answer_answers_503(monkeypatch):
    monkeypatch.setenv("CELERY_BROKER_URL", f"redis://127.0.0.1:{closed_port()}/0")  # Celery reads it before settings
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["broker"] == "unavailable (OperationalError)"
    assert response.json()["database"] == response.json()["migrations"] == "ok"
