"""Integration tests skip with a useful message where services are missing, and fail under CI; a server that is
down is told apart from one that refuses the login (tests/services.py)."""
import os
import socket
import subprocess
import sys

from django.conf import settings

from tests import services

DEAD = {"DATABASE_URL": "postgres://postgres@127.0.0.1:1/aiteam", "CELERY_BROKER_URL": "redis://127.0.0.1:1/0",
        "DJANGO_SECRET_KEY": "aiteam-tests-only-not-a-secret"}


def run_integration(**env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/integration/test_outbox_relays.py", "-q", "-rs", "-p", "no:cacheprovider"],
        env={**os.environ, **DEAD, **env}, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=120,
    )


def test_missing_services_are_skipped_with_what_and_how():
    result = run_integration(CI="")
    assert result.returncode == 0, result.stdout[-2000:]
    assert "skipped" in result.stdout
    assert "PostgreSQL at 127.0.0.1:1" in result.stdout and "Redis at 127.0.0.1:1" in result.stdout
    assert "docker compose up -d postgres redis" in result.stdout


def test_missing_services_fail_under_ci():
    result = run_integration(CI="true")
    assert result.returncode != 0
    assert "CI=true and integration tests need their services: PostgreSQL" in result.stdout + result.stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_database_nobody_listens_on_is_not_answering_and_the_advice_is_to_start_it(monkeypatch):
    port = _closed_port()
    monkeypatch.setenv("DATABASE_URL", f"postgres://postgres@127.0.0.1:{port}/aiteam")
    monkeypatch.setenv("CELERY_BROKER_URL", f"redis://127.0.0.1:{port}/15")
    problems = services.missing()
    assert problems == [f"PostgreSQL at 127.0.0.1:{port} not answering", f"Redis at 127.0.0.1:{port} not answering"]
    said = services.message(problems)
    assert services.HOW_TO_START in said and "TEST_DATABASE_URL" not in said


def test_a_refused_login_is_told_apart_and_the_advice_names_the_role_to_use():
    said = services.message(["PostgreSQL at 127.0.0.1:5432 refused user 'postgres' (role does not exist)"])
    assert "docker compose up" not in said
    assert f"TEST_DATABASE_URL={services.COMPOSE_DATABASE_URL}" in said
