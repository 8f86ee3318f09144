"""A deployment (DATABASE_URL set) never runs with the embedded default's public secret key: every process stops at
start and says how to set one. The database is never reached: the settings refuse first."""
import os
import subprocess
import sys

import pytest
from django.conf import settings

DEPLOYMENT = {"DATABASE_URL": "postgres://aiteam@127.0.0.1:9/aiteam", "CELERY_BROKER_URL": "redis://127.0.0.1:9/0"}
MANAGE_CHECK = [sys.executable, "manage.py", "check"]
WORKER = [sys.executable, "-m", "celery", "-A", "aiteam", "worker", "-l", "INFO"]


def start(command: list[str], **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SECRET_KEY")}
    return subprocess.run(command, cwd=settings.BASE_DIR, env={**base, **env}, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("command", [MANAGE_CHECK, WORKER], ids=["manage.py", "celery worker"])
@pytest.mark.parametrize("key", [None, "", "insecure-embedded-default-change-me"], ids=["unset", "empty", "public"])
def test_a_deployment_without_its_own_secret_key_does_not_start(command, key):
    done = start(command, **DEPLOYMENT, **({} if key is None else {"DJANGO_SECRET_KEY": key}))
    assert done.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY is not set and DATABASE_URL is" in done.stderr
    assert "secrets.token_urlsafe(50)" in done.stderr  # how to make one


def test_a_deployment_with_its_own_key_starts():
    done = start(MANAGE_CHECK, **DEPLOYMENT, DJANGO_SECRET_KEY="a-key-of-this-deployment-only")
    assert done.returncode == 0, done.stderr


def test_the_embedded_default_needs_no_key():
    done = start(MANAGE_CHECK)
    assert done.returncode == 0, done.stderr
