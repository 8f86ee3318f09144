"""aiteam.db.write_behind on SQLite, where every write runs at once (tests/write_behind_cases.py)."""
import pytest

from tests.write_behind_cases import CASES


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__.removeprefix("check_"))
def test_write_behind(case, acme_project):
    case(acme_project)
