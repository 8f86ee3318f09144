"""tests/services.py against the real PostgreSQL: a server that answers but refuses the URL's role is reported as
such, not as down (following "start it" would loop)."""
from tests import services


def test_a_role_the_server_refuses_is_reported_as_refused(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://no_such_role_aiteam@127.0.0.1:5432/aiteam")
    problems = services.missing()
    assert len(problems) == 1 and "refused user 'no_such_role_aiteam'" in problems[0]
    assert "does not exist" in problems[0] or "authentication failed" in problems[0]
