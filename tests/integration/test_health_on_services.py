"""Health on real PostgreSQL and Redis: the web app's /healthz, and the worker check docker-compose runs."""
import socket
import subprocess
import sys

from django.conf import settings
from django.test import Client

from tests.unit.test_health import closed_port


def test_healthz_answers_200_on_postgresql_and_redis():
    assert settings.DATABASES["default"]["ENGINE"].endswith("postgresql") and settings.CELERY_BROKER_URL.startswith("redis")
    response = Client().get("/healthz")
    assert (response.status_code, response.json()["status"]) == (200, "ok"), response.json()


def test_healthz_answers_503_naming_the_broker_when_redis_does_not_answer(monkeypatch):
    monkeypatch.setenv("CELERY_BROKER_URL", f"redis://127.0.0.1:{closed_port()}/0")  # Celery reads it before settings
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "database": "ok", "broker": "unavailable (OperationalError)",
                               "migrations": "ok"}


def ping(worker, name: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "celery", "-A", "aiteam", "inspect", "ping", "-d", name, "--timeout", "3"]
    return subprocess.run(command, cwd=settings.BASE_DIR, env=worker.env, capture_output=True, text=True, timeout=60)


def test_a_running_worker_answers_the_compose_health_check_and_a_missing_one_fails_it(worker):
    answered = ping(worker, f"main@{socket.gethostname()}")
    assert answered.returncode == 0 and "pong" in answered.stdout, answered.stdout + answered.stderr
    assert ping(worker, f"gone@{socket.gethostname()}").returncode != 0
