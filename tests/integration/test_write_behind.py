"""aiteam.db.write_behind on PostgreSQL (aiteam.db.postgresql): the same promises with writes queued and sent
in one pipeline with the next statement or COMMIT (tests/write_behind_cases.py), and that they are."""
import pytest
from django.db import connection, transaction

from aiteam.db import write_behind
from lifecycle.models import OutboxEvent, Requirement
from tests.write_behind_cases import CASES


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__.removeprefix("check_"))
def test_write_behind(case, acme_project):
    case(acme_project)


@pytest.mark.django_db(transaction=True)
def test_writes_wait_for_the_next_statement_and_go_in_one_round_trip(acme_project, monkeypatch):
    requirement = Requirement.objects.create(organization=acme_project.organization, project=acme_project, title="t")
    pipelines = []
    real = type(connection.connection).pipeline
    monkeypatch.setattr(type(connection.connection), "pipeline", lambda self: pipelines.append(1) or real(self))
    with transaction.atomic():
        write_behind.insert(OutboxEvent(requirement=requirement, name="A"))
        write_behind.insert(OutboxEvent(requirement=requirement, name="B"))
        assert connection.write_behind and not pipelines  # queued, nothing sent yet
        assert OutboxEvent.objects.count() == 2  # sent with this read
        assert not connection.write_behind and len(pipelines) == 1
        write_behind.insert(OutboxEvent(requirement=requirement, name="C"))
    assert len(pipelines) == 2 and OutboxEvent.objects.count() == 3  # the last one went with COMMIT
