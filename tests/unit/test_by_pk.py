"""aiteam.db.by_pk: reads by primary key through SQL compiled once give what the ORM gives (on SQLite here, on
PostgreSQL in `make test-unit-pg`), in one statement, and feed write_behind's memory of the loaded row."""
from __future__ import annotations

import re
import uuid
from datetime import datetime

import pytest
from django.db import connection, models, transaction
from django.test.utils import CaptureQueriesContext

from aiteam.db import by_pk, write_behind
from lifecycle.models import Requirement, Step


@pytest.fixture
def requirement(acme_project) -> Requirement:
    return Requirement.objects.create(
        organization=acme_project.organization, project=acme_project, title="t", brief="b" * 2048,
        clarifications=[{"q": "who?", "a": "ops"}], run_settings={"budgets": {"requirement": {"steps": 7}}})


@pytest.mark.django_db
def test_get_loads_every_field_as_the_orm_does(requirement):
    with CaptureQueriesContext(connection) as log:
        mine = by_pk.get(Requirement, requirement.pk)
    theirs = Requirement.objects.get(pk=requirement.pk)
    fields = Requirement._meta.concrete_fields
    assert [f.value_from_object(mine) for f in fields] == [f.value_from_object(theirs) for f in fields]
    assert isinstance(mine.pk, uuid.UUID) and isinstance(mine.created_at, datetime) and mine.created_at.tzinfo
    assert mine.run_settings == {"budgets": {"requirement": {"steps": 7}}}  # JSON decoded by its converter
    assert not mine._state.adding and mine._state.db == "default"
    assert len(log.captured_queries) == 1


@pytest.mark.django_db
def test_values_reads_the_named_fields_in_one_statement(requirement):
    with CaptureQueriesContext(connection) as log:
        row = by_pk.values(Requirement, requirement.pk, ("brief", "project_id", "clarifications", "state"))
        again = by_pk.values(Requirement, str(requirement.pk), ("brief", "project_id", "clarifications", "state"))
    assert row == again == Requirement.objects.values_list(
        "brief", "project_id", "clarifications", "state").get(pk=requirement.pk)
    assert len(log.captured_queries) == 2
    sql = log[0]["sql"]  # as get() sends it: the key only, without the model's default ordering
    assert re.fullmatch(r'SELECT .*"brief".* WHERE "lifecycle_requirement"\."id" = \S+', sql) and "ORDER" not in sql


@pytest.mark.django_db(transaction=True)
def test_a_read_sees_the_writes_queued_before_it(requirement):
    """On PostgreSQL the write waits in write-behind's queue: the read sends it first, in the same round trip."""
    with transaction.atomic():
        write_behind.update(Requirement(pk=requirement.pk, title="queued"), ("title",))
        assert by_pk.values(Requirement, requirement.pk, ("title",)) == ("queued",)
        assert by_pk.get(Requirement, requirement.pk).title == "queued"


@pytest.mark.django_db
def test_a_missing_row_raises_does_not_exist(requirement):
    with pytest.raises(Requirement.DoesNotExist):
        by_pk.get(Requirement, uuid.uuid4())
    with pytest.raises(Step.DoesNotExist):
        by_pk.values(Step, 10**9, ("key",))


@pytest.mark.django_db(transaction=True)
def test_a_row_read_in_the_transaction_is_remembered_for_write_behind(requirement):
    """Read inside the transaction, the row is what it was loaded with: saving it writes only what changed."""
    with CaptureQueriesContext(connection) as log, transaction.atomic():
        loaded = by_pk.get(Requirement, requirement.pk)
        loaded.title = "renamed"
        write_behind.save(loaded)
    updates = [q["sql"].split(" WHERE ")[0] for q in log.captured_queries if q["sql"].startswith("UPDATE")]
    assert len(updates) == 1 and '"title" = ' in updates[0] and '"brief"' not in updates[0]
    assert Requirement.objects.get(pk=requirement.pk).title == "renamed"


def test_a_default_manager_that_adds_a_parameter_is_refused(monkeypatch):
    """The cached SQL must take the key and nothing else: a manager's own filter would be frozen into it."""
    class Scoped(models.Manager):
        def get_queryset(self):
            return super().get_queryset().filter(attempt__gt=0)

    manager = Scoped()
    manager.model = Step
    monkeypatch.setattr(Step._meta, "default_manager", manager)
    with pytest.raises(ValueError, match="one key parameter"):
        by_pk._compiled.__wrapped__(Step, ("key",), "default", connection.vendor)
