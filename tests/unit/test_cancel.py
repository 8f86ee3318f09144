"""POST /requirements/{id}/cancel/: its reviewers and admins, or its own submitter, cancel a requirement; every
waiting review task expires and no step starts afterwards. Another member who only submits gets 403, another
organization 404, a finished requirement 409, a missing reason 400."""
import pytest

from lifecycle import step_keys
from lifecycle.models import OutboxEvent, Requirement
from lifecycle.services.scheduling import step_schedule
from tests.conftest import api_for
from tests.flows import fresh, pending, submit, transitions

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/api/v1/requirements/"
WHY = {"reason": "The customer withdrew the request."}


def cancel(user, requirement: Requirement, payload: dict = WHY):
    return api_for(user).post(f"{URL}{requirement.pk}/cancel/", payload, format="json")


@pytest.fixture
def waiting(alice) -> Requirement:
    """The sample brief at its stories approval (the bundled cassette answers it)."""
    req = submit(alice)
    assert req.state == "user_stories_created", transitions(req)
    return req


def test_a_reviewer_cancels_and_the_waiting_task_expires(waiting, rita):
    task = pending(waiting, "stories_approval")
    response = cancel(rita, waiting)
    assert response.status_code == 200, response.data
    assert response.data["state"] == "cancelled"
    req = fresh(waiting)
    row = req.transitions.get(event="cancel")
    assert (row.from_state, row.to_state, row.actor_user, row.via) == ("user_stories_created", "cancelled", rita, "api")
    origin = row.metadata.pop("origin")  # where rita acted from, as a decision records it
    assert row.metadata == WHY and origin["path"] == f"{URL}{waiting.pk}/cancel/"
    task.refresh_from_db()
    assert task.state == "expired"
    assert OutboxEvent.objects.get(requirement=req, name="RequirementCancelled").payload == {
        **WHY, "expired_tasks": [str(task.pk)]}


def test_the_submitter_may_withdraw_their_own_but_not_anothers(waiting, alice, sam):
    assert cancel(sam, waiting).status_code == 403  # a submitter, but not of this one
    assert fresh(waiting).state == "user_stories_created"
    assert cancel(alice, waiting).status_code == 200
    assert fresh(waiting).state == "cancelled"


def test_other_tenants_get_404_and_bad_input_400(waiting, rita, oscar):
    assert cancel(oscar, waiting).status_code == 404
    assert cancel(None, waiting).status_code == 401
    missing = cancel(rita, waiting, {})
    assert missing.status_code == 400 and "reason" in missing.data, missing.data
    blank = cancel(rita, waiting, {"reason": "   "})
    assert blank.status_code == 400 and "reason" in str(blank.data), blank.data
    extra = cancel(rita, waiting, {**WHY, "state": "deployed"})
    assert extra.status_code == 400, extra.data
    assert fresh(waiting).state == "user_stories_created"


def test_a_cancelled_requirement_cannot_be_cancelled_again(waiting, rita):
    assert cancel(rita, waiting).status_code == 200
    again = cancel(rita, waiting)
    assert again.status_code == 409, again.data
    assert fresh(waiting).transitions.filter(event="cancel").count() == 1


def test_no_step_starts_once_it_is_cancelled(waiting, rita, scripted):
    assert cancel(rita, waiting).status_code == 200
    step_schedule(requirement_id=waiting.pk, key=step_keys.BA_STORIES, attempt=2)  # a late delivery of a step
    step = fresh(waiting).steps.get(key=step_keys.BA_STORIES, attempt=2)
    assert step.state == "skipped"
    assert scripted.requests == []  # no model call was made for it
