"""The same POST /requirements/ sent several times at once with one Idempotency-Key, on PostgreSQL: every
answer names the same requirement, and it was made once (the later INSERTs wait on the unique index for the
first transaction, then fail and read what it made)."""
import threading

import pytest
from django.db import connection

from lifecycle.models import Requirement, StateTransition, Step
from tests.conftest import api_for

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/api/v1/requirements/"
RACES, CLIENTS = 10, 4


def post_together(user, key: str) -> list:
    barrier, answers = threading.Barrier(CLIENTS), []

    def post():
        client = api_for(user)
        barrier.wait()
        try:
            response = client.post(URL, {"brief": "A reading list", "title": "race"}, format="json",
                                   HTTP_IDEMPOTENCY_KEY=key)
            answers.append((response.status_code, response.data.get("id"), response.get("Idempotent-Replayed")))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return answers


def test_concurrent_repeats_of_one_keyed_post_make_one_requirement(alice):
    api_for(alice)  # its token, before the threads
    for race in range(RACES):
        answers = post_together(alice, f"race-{race}")
        assert len(answers) == CLIENTS and {status for status, _, _ in answers} == {201}, answers
        assert len({pk for _, pk, _ in answers}) == 1, answers
        assert sorted(str(replayed) for _, _, replayed in answers) == ["None"] + ["true"] * (CLIENTS - 1), answers
        requirement = Requirement.objects.get(idempotency_keys__key=f"race-{race}")
        assert StateTransition.objects.filter(requirement=requirement).count() == 1
        assert Step.objects.filter(requirement=requirement).count() == 1
    assert Requirement.objects.count() == RACES
