"""Opening review tasks (lifecycle/services/reviews.py): each task of a requirement gets its own round."""
import pytest

from lifecycle.services.reviews import review_open
from tests.flows import submit

pytestmark = pytest.mark.django_db(transaction=True)


def test_escalations_from_stories_and_from_development_never_share_a_round(alice):
    req = submit(alice)
    first = review_open(req, kind="escalation", question="stories?", resume_target="ba_stories")
    second = review_open(req, kind="escalation", question="code?", resume_target="engineer_fix")
    assert (first.round, second.round) == (1, 2)
