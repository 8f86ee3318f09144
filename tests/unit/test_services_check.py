"""tests/services.py: what `make test` says when the services it needs are down or refuse the login."""
import socket

from tests import services


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
