"""Which real services the integration tests need, and whether they answer."""
from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/aiteam"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/15"
HOW_TO_START = "start them with `docker compose up -d postgres redis` (or your distribution's services)"
COMPOSE_DATABASE_URL = "postgres://aiteam:aiteam@127.0.0.1:5432/aiteam"  # docker-compose.yml's role


def missing() -> list[str]:
    """What keeps the tests from the services: each one that does not answer, or refuses the URL's login."""
    problems = []
    db = os.environ.get("DATABASE_URL", "")
    if not db.startswith("postgres"):
        problems.append("PostgreSQL (DATABASE_URL is not a postgres:// URL)")
    elif refused := _postgres_refuses(db):
        problems.append(refused)
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis"):
        problems.append("Redis (CELERY_BROKER_URL is not a redis:// URL)")
    elif not _redis_answers(broker):
        problems.append(f"Redis at {urlparse(broker).hostname}:{urlparse(broker).port or 6379} not answering")
    return problems


def message(problems: list[str]) -> str:
    """What is wrong and what to do: start a service that is down; name a role that logs in."""
    advice = [HOW_TO_START] if any(p.endswith("not answering") or "not a " in p for p in problems) else []
    if any("refused" in p for p in problems):
        advice.append("set TEST_DATABASE_URL to a role that may log in and create databases (with docker compose: "
                      f"TEST_DATABASE_URL={COMPOSE_DATABASE_URL})")
    return f"{'; '.join(problems)}; {' and '.join(advice)}"


def _postgres_refuses(url: str) -> str:
    """"" when the URL's role logs in; else why not: nothing listens there, or the server refused the login."""
    import psycopg

    parts = urlparse(url)
    where = f"PostgreSQL at {parts.hostname}:{parts.port or 5432}"
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5432), timeout=3).close()
    except OSError:
        return f"{where} not answering"
    user = parts.username or "postgres"
    try:
        psycopg.connect(host=parts.hostname, port=parts.port or 5432, user=user, password=parts.password,
                        dbname="postgres", connect_timeout=3).close()
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        return f"{where} refused user {user!r} ({reason})"
    return ""


def _redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=3).ping())
    except redis.RedisError:
        return False


if __name__ == "__main__":  # `python -m tests.services`: exit 1 naming what does not answer (the Makefile asks)
    import sys

    gone = missing()
    if gone:
        sys.exit(message(gone))
