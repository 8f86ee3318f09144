"""The outbox: events exist only with their transaction, and are applied once however often relayed."""
import pytest
from django.db import transaction

from lifecycle import handlers
from lifecycle.models import OutboxEvent, Requirement, Step
from lifecycle.services import dispatch, outbox

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def requirement(acme_project):
    return Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b")


@pytest.fixture
def no_delivery(monkeypatch):
    sent = []
    monkeypatch.setattr(dispatch, "send_step", lambda step_id, key, countdown=None: sent.append(step_id))
    return sent


def test_an_event_whose_transaction_rolled_back_never_exists(requirement, no_delivery):
    with pytest.raises(RuntimeError), transaction.atomic():
        outbox.emit(requirement, "RequirementClarified", {"round": 1})
        raise RuntimeError("the state change failed")
    assert not OutboxEvent.objects.exists()
    assert not Step.objects.exists() and no_delivery == []


def test_relaying_an_event_again_applies_it_once(requirement, no_delivery):
    with transaction.atomic():
        event = outbox.emit(requirement, "RequirementClarified", {"round": 1})
    OutboxEvent.objects.filter(pk=event.pk).update(sent_at=None)  # as if the relay died before marking it
    assert outbox.relay() == 1
    assert Step.objects.filter(requirement=requirement).count() == 1
    assert no_delivery == [Step.objects.get().pk]  # queued once: the second relay found the step row


def test_a_relay_killed_mid_handler_leaves_the_event_for_the_next_relay(requirement, no_delivery, monkeypatch):
    def dies_after_writing(event):
        handlers.schedule_business_analyst(event)
        raise SystemError("relay process killed")

    with monkeypatch.context() as patched, transaction.atomic():
        patched.setitem(handlers.HANDLERS, "RequirementClarified", [dies_after_writing])
        event = outbox.emit(requirement, "RequirementClarified", {"round": 1})
    event.refresh_from_db()
    assert event.sent_at is None and event.relay_attempts == 1 and "killed" in event.last_error
    assert not Step.objects.exists()  # the handler's write rolled back with it
    assert outbox.relay() == 1
    assert Step.objects.count() == 1 and OutboxEvent.objects.get().sent_at is not None
    assert outbox.relay() == 0


def test_the_relay_serves_fresh_events_before_ones_that_keep_failing(requirement, monkeypatch):
    OutboxEvent.objects.bulk_create(OutboxEvent(requirement=requirement, name="Broken", relay_attempts=5) for _ in range(3))
    fresh_event = OutboxEvent.objects.create(requirement=requirement, name="Ping")
    monkeypatch.setitem(handlers.HANDLERS, "Broken", [lambda event: 1 / 0])
    assert outbox.relay(limit=1) == 1
    fresh_event.refresh_from_db()
    assert fresh_event.sent_at is not None
