"""aiteam.db.write_behind on SQLite, where every write runs at once (tests/write_behind_cases.py)."""
import pytest
from django.db import connection, transaction

from aiteam.db import write_behind
from tests.write_behind_cases import CASES


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__.removeprefix("check_"))
def test_write_behind(case, acme_project):
    case(acme_project)


@pytest.mark.django_db(transaction=True)
def test_no_read_rides_with_commit_where_commit_carries_no_pipeline():
    """SQLite's COMMIT carries nothing: the caller reads when it needs the answer (tests/unit also runs on
    PostgreSQL, where the read is queued: tests/integration/test_write_behind.py)."""
    with transaction.atomic():
        read = write_behind.read_at_commit("SELECT 1", ())
    assert (read is None) == (connection.vendor == "sqlite")
