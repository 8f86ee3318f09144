"""Shared fixtures: the network blocked, named personas, and an LLM provider per test.

Personas: alice submits briefs to acme; rita reviews acme; sam is in acme with the
submitter role only (may not decide); oscar reviews for another organization (globex).
"""
from __future__ import annotations

import ipaddress
import os
import socket

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from lifecycle.models import ApiToken
from lifecycle.services.tokens import token_issue
from tests import query_shapes
from tests.factories import MembershipFactory, OrganizationFactory, ProjectFactory

_real_connect = socket.socket.connect
_DATABASE_FIXTURES = {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback",
                      "live_server"}


def pytest_addoption(parser):
    parser.addoption("--database-tests-only", action="store_true",
                     help="run only the tests that use the database (make test-unit-pg: the rest ran on SQLite)")


def pytest_collection_modifyitems(config, items):
    """With --database-tests-only, tests that never touch the database (the sandbox, edits, the repository index,
    environments, host clients) are deselected: running them again against PostgreSQL tests nothing new. So are
    those listed in tests/sqlite_only.txt: each statement they send, a test that stays sends too
    (tests/query_shapes.py), while recording shapes for that list, none is left out."""
    if not config.getoption("--database-tests-only"):
        return
    sqlite_only = set() if os.environ.get(query_shapes.ENV) else query_shapes.read_list()
    kept, dropped = [], []
    for item in items:
        uses_db = item.get_closest_marker("django_db") or _DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        (kept if uses_db and item.nodeid not in sqlite_only else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


_recorder = query_shapes.Recorder(os.environ[query_shapes.ENV]) if os.environ.get(query_shapes.ENV) else None


@pytest.fixture(autouse=True)
def _query_shapes(request):
    """Records the statements each test sends, for tests/query_shapes.py; off unless AITEAM_QUERY_SHAPES is set."""
    if _recorder is None:
        yield
        return
    from django.db import connection

    counts = query_shapes.counts_queries(request.fixturenames, getattr(request.node, "function", None))
    with connection.execute_wrapper(_recorder.wrapper(request.node.nodeid, counts=counts)):
        yield


def pytest_runtest_logreport(report):
    if _recorder is not None:
        _recorder.timed(report)


def pytest_sessionfinish(session):
    if _recorder is not None:
        _recorder.write(os.environ.get("PYTEST_XDIST_WORKER", "main"))


def _loopback_only(self, address):
    host = address[0] if isinstance(address, tuple) else None
    if host is not None:
        try:
            if not ipaddress.ip_address(socket.gethostbyname(host)).is_loopback:
                raise ConnectionRefusedError(f"network blocked in tests: {address}")
        except (socket.gaierror, ValueError):
            raise ConnectionRefusedError(f"network blocked in tests: {address}") from None
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


@pytest.fixture(autouse=True)
def _reviewers_decide(settings, tmp_path):
    """Autonomous approval is the embedded default; tests decide reviews themselves unless they opt in.
    Generated code goes to a per-test workspace root, never into the repository's var/."""
    settings.AITEAM_AUTONOMOUS = False
    settings.AITEAM_WORKSPACE_ROOT = tmp_path / "workspaces"
    settings.AITEAM_MIRROR_ROOT = tmp_path / "mirrors"


@pytest.fixture(autouse=True)
def _rate_limits_out_of_the_way(settings):
    """No test is throttled unless it sets the limits it tests (tests/unit/test_throttling.py): the rates are high,
    and each test counts from zero in an empty in-memory cache, never another run's counts in a shared Redis."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"anon": "100000/min", "user": "100000/min", "submit": "100000/min"}}
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tests"}}
    cache.clear()


@pytest.fixture
def acme(db):
    return OrganizationFactory(slug="acme", name="Acme")


@pytest.fixture
def acme_project(acme):
    return ProjectFactory(organization=acme, slug="default")


@pytest.fixture
def globex(db):
    return OrganizationFactory(slug="globex", name="Globex")


@pytest.fixture
def alice(acme, acme_project):
    return MembershipFactory(organization=acme, role="submitter", user__username="alice").user


@pytest.fixture
def rita(acme, acme_project):
    return MembershipFactory(organization=acme, role="reviewer", user__username="rita").user


@pytest.fixture
def sam(acme):
    return MembershipFactory(organization=acme, role="submitter", user__username="sam").user


@pytest.fixture
def oscar(globex):
    ProjectFactory(organization=globex, slug="default")
    return MembershipFactory(organization=globex, role="reviewer", user__username="oscar").user


def api_for(user) -> APIClient:
    """An API client sending a new token of `user`'s (none for None)."""
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {token_issue(token=ApiToken(user=user, name='tests'))}")
    return client


@pytest.fixture
def scripted(monkeypatch):
    """A provider with queued answers, used by every step of the test instead of the cassette."""
    from agents.llm.scripted import ScriptedProvider

    provider = ScriptedProvider()
    monkeypatch.setattr("lifecycle.runner.provider_from_settings", lambda: provider)
    monkeypatch.setattr("lifecycle.services.answering.provider_from_settings", lambda: provider)
    return provider


def staff_client(user):
    """A Django test client logged in as `user`, who is made staff (admin access; deciding still needs a role)."""
    from django.test import Client

    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client
