"""What aiteam.db.write_behind (and the compiled apply lock) promise on every backend: run on SQLite by
tests/unit, on PostgreSQL's pipelining backend by tests/integration. Rows land, keys are set, reads see
earlier writes, a rollback or a rolled-back savepoint drops them, insert_once is harmless in a transaction."""
from __future__ import annotations

import re

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from aiteam.db import write_behind
from lifecycle.models import OutboxEvent, Requirement, Step


def _requirement(acme_project) -> Requirement:
    return Requirement.objects.create(organization=acme_project.organization, project=acme_project, title="t",
                                      brief="b")


def check_rows_land_with_their_keys_and_reads_see_them(acme_project) -> None:
    requirement = _requirement(acme_project)
    with transaction.atomic():
        event = OutboxEvent(requirement=requirement, name="Queued", payload={"n": 1})
        write_behind.insert(event)
        assert OutboxEvent.objects.filter(name="Queued", payload__n=1).count() == 1  # the read sends it first
        assert event.pk is not None
        second = OutboxEvent(requirement=requirement, name="AtCommit")
        write_behind.insert(second)
    assert second.pk == OutboxEvent.objects.get(name="AtCommit").pk  # sent with COMMIT, key set after it


def check_update_and_save_write_what_they_name(acme_project) -> None:
    requirement = _requirement(acme_project)
    step = Step.objects.create(requirement=requirement, key="k", attempt=1)
    with transaction.atomic():
        step.error, step.worker = "changed", "not saved"
        write_behind.update(step, ("error",))
        requirement.title = "renamed"
        write_behind.save(requirement)
    step.refresh_from_db()
    assert (step.error, step.worker) == ("changed", "")
    assert Requirement.objects.get(pk=requirement.pk).title == "renamed"
    partial = Requirement.objects.only("id", "title").get(pk=requirement.pk)
    Requirement.objects.filter(pk=requirement.pk).update(brief="written elsewhere")
    with transaction.atomic():
        partial.title = "again"
        write_behind.save(partial)  # like save(): a field never loaded is neither fetched nor overwritten
    assert Requirement.objects.values_list("title", "brief").get(pk=requirement.pk) == ("again", "written elsewhere")


def check_a_rollback_drops_queued_writes(acme_project) -> None:
    requirement = _requirement(acme_project)
    with pytest.raises(RuntimeError), transaction.atomic():
        write_behind.insert(OutboxEvent(requirement=requirement, name="Lost"))
        raise RuntimeError("the service failed")
    with transaction.atomic():
        write_behind.insert(OutboxEvent(requirement=requirement, name="Kept"))
        try:
            with transaction.atomic():
                write_behind.insert(OutboxEvent(requirement=requirement, name="InnerLost"))
                raise RuntimeError("the inner block failed")
        except RuntimeError:
            pass
    assert list(OutboxEvent.objects.values_list("name", flat=True)) == ["Kept"]


def check_insert_once_inside_a_transaction(acme_project) -> None:
    requirement = _requirement(acme_project)
    with transaction.atomic():
        first, again = Step(requirement=requirement, key="k", attempt=1), Step(requirement=requirement, key="k", attempt=1)
        write_behind.insert_once(first)
        write_behind.insert_once(again)
        assert Step.objects.filter(requirement=requirement).count() == 1  # a read sends both first
        assert first.pk is not None and again.pk is None  # the second found the row: nothing inserted
        write_behind.insert(OutboxEvent(requirement=requirement, name="After"))  # the transaction is still usable
        write_behind.insert_once(Step(requirement=requirement, key="k", attempt=2))  # sent with COMMIT
    assert Step.objects.filter(requirement=requirement).count() == 2
    assert OutboxEvent.objects.filter(name="After").exists()


def check_a_failing_queued_write_fails_the_transaction(acme_project) -> None:
    requirement = _requirement(acme_project)
    with pytest.raises(IntegrityError), transaction.atomic():
        write_behind.insert(OutboxEvent(requirement=requirement, name="Fine"))
        write_behind.insert(Step(requirement=requirement, key="k", attempt=None))  # NOT NULL
    assert not OutboxEvent.objects.filter(name="Fine").exists()


def check_the_query_log_shows_every_write(acme_project) -> None:
    requirement = _requirement(acme_project)
    with CaptureQueriesContext(connection) as log, transaction.atomic():
        write_behind.insert(OutboxEvent(requirement=requirement, name="Logged"))
        write_behind.update(requirement, ("title",))
    assert sum(q["sql"].startswith(("INSERT", "UPDATE")) for q in log.captured_queries) == 2



def check_the_apply_lock_loads_what_the_orm_loads(acme_project) -> None:
    """steps.lock_for_apply runs the ORM's select_for_update().select_related("requirement") compiled once."""
    from lifecycle.services import steps

    requirement = _requirement(acme_project)
    requirement.run_settings = {"budgets": {"requirement": {"steps": 7}}}
    requirement.save()
    step = Step.objects.create(requirement=requirement, key="k", attempt=2, state="running", fence=3)
    with transaction.atomic():
        locked, locked_requirement = steps.lock_for_apply(steps.Lease(step.pk, 3, requirement.pk, "k", 2))
    orm = Step.objects.select_related("requirement").get(pk=step.pk)
    for model, mine, theirs in ((Step, locked, orm), (Requirement, locked_requirement, orm.requirement)):
        assert [f.value_from_object(mine) for f in model._meta.concrete_fields] == \
            [f.value_from_object(theirs) for f in model._meta.concrete_fields]
    assert locked.requirement is locked_requirement and not locked._state.adding


def check_a_json_value_is_written_as_it_was_at_the_call(acme_project) -> None:
    requirement = _requirement(acme_project)
    payload = {"n": 1}
    with transaction.atomic():
        write_behind.insert(OutboxEvent(requirement=requirement, name="Snapshot", payload=payload))
        payload["n"] = 2  # after the call: not part of the write
    assert OutboxEvent.objects.get(name="Snapshot").payload == {"n": 1}


def check_the_apply_lock_needs_a_transaction(acme_project) -> None:
    from django.db.transaction import TransactionManagementError

    from lifecycle.services import steps

    step = Step.objects.create(requirement=_requirement(acme_project), key="k", attempt=1, state="running", fence=1)
    with pytest.raises(TransactionManagementError):
        steps.lock_for_apply(steps.Lease(step.pk, 1, step.requirement_id, "k", 1))


def _update_columns(log) -> list[str]:
    """The columns each captured UPDATE of a requirement sets."""
    return [re.findall(r'"(\w+)" = ', q["sql"].split(" WHERE ")[0]) for q in log.captured_queries
            if q["sql"].startswith('UPDATE "lifecycle_requirement"')]


def check_save_writes_only_what_changed_since_the_row_was_loaded_in_this_transaction(acme_project) -> None:
    requirement = _requirement(acme_project)
    with CaptureQueriesContext(connection) as log, transaction.atomic():
        locked = Requirement.objects.select_for_update().get(pk=requirement.pk)
        locked.title, locked.clarifications = "renamed", [*locked.clarifications, {"q": "why?"}]
        write_behind.save(locked)
        write_behind.save(locked)  # nothing changed since: no UPDATE
        locked.clarifications.append({"q": "and how?"})  # a JSON value changed in place: seen, and written
        locked.budget_overrides["steps"] = 3
        write_behind.save(locked)
    assert _update_columns(log) == [["title", "clarifications"], ["clarifications", "budget_overrides"]]
    assert Requirement.objects.values_list("title", "clarifications", "budget_overrides").get(pk=requirement.pk) == \
        ("renamed", [{"q": "why?"}, {"q": "and how?"}], {"steps": 3})


def check_save_writes_every_field_when_the_memory_cannot_be_trusted(acme_project) -> None:
    requirement = _requirement(acme_project)
    every = [f.name for f in Requirement._meta.concrete_fields if not f.primary_key]
    loaded_before = Requirement.objects.get(pk=requirement.pk)  # outside the transaction that saves it
    with CaptureQueriesContext(connection) as log, transaction.atomic():
        write_behind.save(loaded_before)
        locked = Requirement.objects.get(pk=requirement.pk)
        try:
            with transaction.atomic():
                locked.title = "undone"
                write_behind.save(locked)
                raise RuntimeError("rolled back to the savepoint")
        except RuntimeError:
            pass
        locked.title = "t"  # what it was loaded with, but the row's memory is gone with the rollback
        write_behind.save(locked)
    updates = _update_columns(log)  # the rolled-back one is on SQLite's log only: PostgreSQL's was never sent
    assert updates[0] == updates[-1] == [Requirement._meta.get_field(name).column for name in every]


def check_a_value_set_back_after_a_save_is_written(acme_project) -> None:
    """What the row holds is remembered at each save (queued, Django's or a refresh), not only at the load."""
    requirement = _requirement(acme_project)
    with transaction.atomic():
        locked = Requirement.objects.get(pk=requirement.pk)
        locked.title = "b"
        write_behind.save(locked)
        locked.title = "t"
        write_behind.save(locked)
        locked.story_round = 3
        locked.save(update_fields=["story_round"])
        locked.story_round = 0
        write_behind.save(locked)
        Requirement.objects.filter(pk=requirement.pk).update(design_round=5)
        locked.refresh_from_db(fields=["design_round"])
        locked.design_round = 0
        write_behind.save(locked)
    assert Requirement.objects.values_list("title", "story_round", "design_round").get(pk=requirement.pk) == \
        ("t", 0, 0)


def check_what_a_refresh_or_save_did_not_load_or_write_is_not_taken_as_the_rows(acme_project) -> None:
    """A refresh through a queryset that loads part of the row, and Django's positional save(), forget."""
    requirement = _requirement(acme_project)
    with transaction.atomic():
        locked = Requirement.objects.get(pk=requirement.pk)
        locked.brief = "changed in memory"
        locked.refresh_from_db(from_queryset=Requirement.objects.only("id", "state"))
        write_behind.save(locked)
    assert Requirement.objects.get(pk=requirement.pk).brief == "changed in memory"


def check_django_manual_mode_trusts_nothing_across_its_commits(acme_project) -> None:
    requirement = _requirement(acme_project)
    transaction.set_autocommit(False)
    try:
        loaded = Requirement.objects.get(pk=requirement.pk)
        transaction.commit()
        Requirement.objects.filter(pk=requirement.pk).update(title="elsewhere")
        transaction.commit()
        with transaction.atomic():
            loaded.title = "t"  # what it was loaded with, in an earlier transaction
            write_behind.save(loaded)
        transaction.commit()
    finally:
        transaction.set_autocommit(True)
    assert Requirement.objects.get(pk=requirement.pk).title == "t"


CASES = [value for name, value in sorted(globals().items()) if name.startswith("check_")]
