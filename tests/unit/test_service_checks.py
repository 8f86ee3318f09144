"""Integration tests skip with a useful message where services are missing, and fail under CI."""
import os
import subprocess
import sys

from django.conf import settings

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
    assert "CI=true and integration tests need PostgreSQL" in result.stdout + result.stderr
