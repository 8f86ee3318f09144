"""The outbox on PostgreSQL: concurrent relays never publish the same row; a relay that dies
mid-event leaves it for the next relay, which applies it once."""
import threading
import time
from collections import Counter

import pytest
from django.db import connection, transaction

from lifecycle import handlers
from lifecycle.models import OutboxEvent, Requirement, Step
from lifecycle.services import dispatch, outbox

pytestmark = pytest.mark.django_db(transaction=True)
EVENTS = 60


@pytest.fixture
def requirement(acme_project):
    return Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b")


def test_two_relays_never_publish_the_same_row(requirement, monkeypatch):
    published: list[int] = []

    def slow_handler(event):
        published.append(event.pk)
        time.sleep(0.005)  # hold the row lock long enough for the other relay to meet it

    monkeypatch.setitem(handlers.HANDLERS, "Ping", [slow_handler])
    OutboxEvent.objects.bulk_create(OutboxEvent(requirement=requirement, name="Ping") for _ in range(EVENTS))
    barrier = threading.Barrier(2)

    def relay():
        barrier.wait()
        try:
            outbox.relay(limit=EVENTS)
        finally:
            connection.close()

    threads = [threading.Thread(target=relay) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert Counter(published).most_common(1)[0][1] == 1
    assert len(published) == EVENTS
    assert not OutboxEvent.objects.filter(sent_at=None).exists()


def test_an_event_left_unsent_by_a_dead_relay_is_applied_once(requirement, monkeypatch):
    queued = []
    monkeypatch.setattr(dispatch, "send_step", lambda step_id, key, countdown=None: queued.append(step_id))

    def dies_mid_event(event):
        handlers.schedule_business_analyst(event)
        raise SystemExit("relay process killed")  # its transaction never commits

    with monkeypatch.context() as patched:
        patched.setitem(handlers.HANDLERS, "RequirementClarified", [dies_mid_event])
        with pytest.raises(SystemExit), transaction.atomic():
            outbox.emit(requirement, "RequirementClarified", {"round": 1})
    assert OutboxEvent.objects.get().sent_at is None and not Step.objects.exists()
    assert outbox.relay() == 1 and outbox.relay() == 0
    assert Step.objects.count() == 1 and len(queued) == 1
