"""Where a person acted from (`metadata.origin`: address, user agent) is shown to the organization's admins and to
operators only; everyone else who may read the requirement sees who acted and what was decided (ADR 27)."""
import pytest

from tests.conftest import api_for, staff_client
from tests.factories import MembershipFactory
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)
ADDRESS, AGENT = "192.0.2.7", "Firefox/140"
INBOX = "/admin/lifecycle/reviewtask/"


@pytest.fixture
def ada(acme):
    return MembershipFactory(organization=acme, role="admin", user__username="ada").user


@pytest.fixture
def root(acme):
    """An operator (superuser), here also a reviewer of the organization so the API lists its requirements."""
    member = MembershipFactory(organization=acme, role="reviewer", user__username="root").user
    member.is_superuser = True
    member.save()
    return member


@pytest.fixture
def claimed(acme_project, rita):
    """A task rita claimed over the API: its audit row records her address and client."""
    task = open_review(acme_project, kind="clarification")
    response = api_for(rita).post(f"/api/v1/review-tasks/{task.pk}/claim/", REMOTE_ADDR=ADDRESS, HTTP_USER_AGENT=AGENT)
    assert response.status_code == 200
    return task


def claim_row(user, task) -> dict:
    response = api_for(user).get(f"/api/v1/requirements/{task.requirement_id}/")
    assert response.status_code == 200
    [row] = [t for t in response.json()["transitions"] if t["event"] == "claim"]
    return row


@pytest.mark.parametrize("persona", ["alice", "rita"])
def test_submitters_and_reviewers_see_who_acted_but_not_from_where(request, claimed, persona):
    row = claim_row(request.getfixturevalue(persona), claimed)
    assert (row["actor_user"], row["via"]) == ("rita", "api")
    assert "origin" not in row["metadata"] and row["metadata"]  # the rest of the metadata stays
    assert ADDRESS not in str(row) and AGENT not in str(row)


@pytest.mark.parametrize("persona", ["ada", "root"])
def test_organization_admins_and_operators_see_where_a_person_acted_from(request, claimed, persona):
    row = claim_row(request.getfixturevalue(persona), claimed)
    assert row["metadata"]["origin"]["ip"] == ADDRESS and row["metadata"]["origin"]["user_agent"] == AGENT


def test_another_organizations_member_sees_no_requirement_at_all(claimed, oscar):
    assert api_for(oscar).get(f"/api/v1/requirements/{claimed.requirement_id}/").status_code == 404


def test_the_review_page_shows_the_address_to_the_organizations_admin_only(claimed, rita, ada):
    url = f"{INBOX}{claimed.pk}/change/"
    reviewer, admin = (staff_client(user).get(url) for user in (rita, ada))
    assert reviewer.status_code == admin.status_code == 200
    assert f"by rita via api from {ADDRESS}" in " ".join(admin.content.decode().split())
    assert "by rita via api" in " ".join(reviewer.content.decode().split()) and ADDRESS not in reviewer.content.decode()


@pytest.mark.parametrize(("action", "body"), [
    ("cancel", {"reason": "withdrawn"}),
    ("retriage", {"playbook": "bug_fix", "reason": "a crash, not a feature"}),
])
def test_a_cancel_or_retriage_over_the_api_records_where_the_person_acted_from(acme_project, ada, action, body):
    task = open_review(acme_project, kind="clarification")
    response = api_for(ada).post(f"/api/v1/requirements/{task.requirement_id}/{action}/", body, format="json",
                                 REMOTE_ADDR=ADDRESS, HTTP_USER_AGENT=AGENT)
    assert response.status_code == 200, response.json()
    [row] = [t for t in response.json()["transitions"] if t["event"] == action]
    assert row["metadata"]["origin"]["ip"] == ADDRESS and row["metadata"]["origin"]["user_agent"] == AGENT
    assert row["metadata"]["origin"]["path"] == f"/api/v1/requirements/{task.requirement_id}/{action}/"
