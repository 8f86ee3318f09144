"""Scheduling a step: the row is inserted once, and only the transaction that inserted it sends it (through the
broker, or to the worker's inline slot). Scheduling it again, as a redelivered apply would, does nothing."""
import pytest
from django.db import transaction

from lifecycle import step_keys
from lifecycle.models import Requirement, Step
from lifecycle.services import dispatch, inline, leases, scheduling

pytestmark = pytest.mark.django_db(transaction=True)  # the on-commit hooks run


@pytest.fixture
def sent(monkeypatch):
    messages = []
    def send(step_id, key, countdown=None):
        messages.append((step_id, step_keys.queue_for(key)))

    monkeypatch.setattr(dispatch, "send_step", send)
    return messages


def test_a_step_scheduled_again_is_neither_inserted_nor_sent_again(sent, acme_project):
    requirement = Requirement.objects.create(organization=acme_project.organization, project=acme_project, title="t")
    with transaction.atomic():
        scheduling.step_schedule(requirement_id=requirement.pk, key="ba_stories", attempt=1)
        scheduling.step_schedule(requirement_id=requirement.pk, key="ba_stories", attempt=1)
        assert sent == []  # nothing leaves before COMMIT
    step = Step.objects.get(requirement=requirement)
    assert sent == [(step.pk, "llm")]
    scheduling.step_schedule(requirement_id=requirement.pk, key="ba_stories", attempt=1)  # autocommit: at once
    assert sent == [(step.pk, "llm")] and Step.objects.count() == 1


def test_an_existing_step_never_fills_the_inline_slot(sent, acme_project, monkeypatch):
    monkeypatch.setattr(inline, "queue_idle", lambda queue: True)
    requirement = Requirement.objects.create(organization=acme_project.organization, project=acme_project, title="t")
    scheduling.step_schedule(requirement_id=requirement.pk, key="tl_plan", attempt=1)
    with inline.inline_slot(queue="llm", worker="here") as slot, transaction.atomic():
        scheduling.step_schedule(requirement_id=requirement.pk, key="tl_plan", attempt=1)
    assert slot.lease is None  # that step is someone else's: its message is already on the way
    assert Step.objects.get(requirement=requirement).state == "queued" and len(sent) == 1
    with inline.inline_slot(queue="llm", worker="here") as slot, transaction.atomic():
        scheduling.step_schedule(requirement_id=requirement.pk, key="tl_plan", attempt=2)
    claimed = Step.objects.get(requirement=requirement, attempt=2)
    assert slot.lease == leases.Lease(claimed.pk, 1, requirement.pk, "tl_plan", 2) and claimed.state == "running"
    assert len(sent) == 1  # the inline step sends no message
