"""Integration tests: real PostgreSQL, real Redis, real Celery workers.

They run when DATABASE_URL and CELERY_BROKER_URL point at PostgreSQL and Redis (`make test`
sets both). Where a service does not answer they are skipped with a message saying which
and how to start it; under CI=true that is a failure instead.
"""
from __future__ import annotations

import os
import warnings

import pytest
import redis
from django.conf import settings
from django.db import connection

from tests import services
from tests.workers import Worker, wait_for


def pytest_collection_modifyitems(config, items):
    mine = [item for item in items if "integration" in item.nodeid.split("::")[0]]
    for item in mine:
        item.add_marker(pytest.mark.integration)
    if not mine:
        return
    gone = services.missing()
    if not gone:
        return
    message = f"integration tests need their services: {services.message(gone)}"
    if os.environ.get("CI", "").lower() == "true":
        raise pytest.UsageError(f"CI=true and {message}")
    for item in mine:
        item.add_marker(pytest.mark.skip(reason=message))


@pytest.fixture(autouse=True)
def _quiet_before_flush(transactional_db):
    """Let running workers finish what a test set off before the database is flushed under them
    (a TRUNCATE racing a step's or a notification's transaction deadlocks). Bounded: a test's own
    assertions come first."""
    yield
    if Worker.running:
        from lifecycle.models import OutboxEvent, Step
        from lifecycle.models.audit import NOTIFYING_EVENTS

        def quiet() -> bool:
            return not Step.objects.filter(state__in=["queued", "running"]).exists() and \
                not OutboxEvent.objects.filter(sent_at=None).exists() and \
                not OutboxEvent.objects.filter(name__in=NOTIFYING_EVENTS, notified_at=None).exists()

        try:
            wait_for(quiet, timeout=60, what="the workers to go quiet")
        except AssertionError:  # a test that leaves work queued on purpose (e.g. a killed worker) is flushed anyway
            busy = list(Step.objects.filter(state__in=["queued", "running"]).values_list("key", "state"))
            unsent = list(OutboxEvent.objects.filter(sent_at=None).values_list("name", flat=True))
            warnings.warn(f"not quiet after 60 s, flushed anyway: steps {busy[:10]}, unsent events {unsent[:10]}",
                          stacklevel=1)


@pytest.fixture(scope="session")
def test_database_url(django_db_setup, django_db_blocker) -> str:
    db = settings.DATABASES["default"]
    with django_db_blocker.unblock():
        name = connection.settings_dict["NAME"]
    return f"postgres://{db.get('USER') or 'postgres'}@{db['HOST']}:{db['PORT'] or 5432}/{name}"


@pytest.fixture(scope="session")
def broker_url() -> str:
    url = settings.CELERY_BROKER_URL
    redis.Redis.from_url(url).flushdb()  # a clean broker database for this run
    return url


@pytest.fixture(scope="module")
def worker(test_database_url, broker_url, tmp_path_factory):
    """A worker on all queues for one test module, as the Procfile runs it (llm and default on threads, sandbox on
    prefork: tests.workers.Worker); stopped after it so that modules starting
    their own workers (crash tests) are the only consumers of the queues."""
    with Worker("main", test_database_url, broker_url, tmp_path_factory.mktemp("worker-main")) as w:
        yield w


@pytest.fixture
def start_worker(test_database_url, broker_url, tmp_path):
    """Start extra workers (with their own settings) that stop at the end of the test."""
    started: list[Worker] = []

    def start(name: str, **env) -> Worker:
        w = Worker(name, test_database_url, broker_url, tmp_path / name, **env).start()
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()
