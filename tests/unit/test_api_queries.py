"""The requirement detail costs the same number of queries however long its history: nothing is fetched
per transition, story, artifact or review task."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import api_for
from tests.flows import decide, pending, submit

pytestmark = pytest.mark.django_db(transaction=True)


def detail_queries(user, requirement) -> int:
    client = api_for(user)
    with CaptureQueriesContext(connection) as captured:
        response = client.get(f"/api/v1/requirements/{requirement.pk}/")
    assert response.status_code == 200
    return len(captured)


def test_the_detail_of_a_delivered_requirement_costs_no_more_queries_than_a_waiting_one(alice, rita, settings):
    settings.AITEAM_AUTONOMOUS = False
    waiting = submit(alice)  # at the stories gate: a few transitions, one open task, no code
    delivered = submit(alice)
    decide(pending(delivered, "stories_approval"), rita, "approve")  # a human's transitions: actor users to name
    decide(pending(delivered, "deployment_approval"), rita, "approve")
    delivered.refresh_from_db()
    assert delivered.state == "deployed" and delivered.transitions.count() > 2 * waiting.transitions.count()
    assert detail_queries(alice, delivered) == detail_queries(alice, waiting)
