"""Which real services the integration tests need, and whether they answer."""
from __future__ import annotations

import os
from urllib.parse import urlparse

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/aiteam"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/15"
HOW_TO_START = "start them with `docker compose up -d postgres redis` (or your distribution's services)"


def missing() -> list[str]:
    """Names and addresses of the services that do not answer."""
    problems = []
    db = os.environ.get("DATABASE_URL", "")
    if not db.startswith("postgres"):
        problems.append("PostgreSQL (DATABASE_URL is not a postgres:// URL)")
    elif not _postgres_answers(db):
        problems.append(f"PostgreSQL at {urlparse(db).hostname}:{urlparse(db).port or 5432}")
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis"):
        problems.append("Redis (CELERY_BROKER_URL is not a redis:// URL)")
    elif not _redis_answers(broker):
        problems.append(f"Redis at {urlparse(broker).hostname}:{urlparse(broker).port or 6379}")
    return problems


def _postgres_answers(url: str) -> bool:
    import psycopg

    parts = urlparse(url)
    try:
        psycopg.connect(host=parts.hostname, port=parts.port or 5432, user=parts.username or "postgres",
                        password=parts.password, dbname="postgres", connect_timeout=3).close()
    except psycopg.Error:
        return False
    return True


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
        sys.exit(f"{', '.join(gone)} not answering; {HOW_TO_START}")
