"""POST /requirements/ with an Idempotency-Key: a retry gets the first requirement back, never a second one."""
import pytest

from lifecycle.models import Requirement, StateTransition, Step
from tests.conftest import api_for
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/requirements/"
BRIEF = {"brief": "A reading list with tags", "title": "Reading list"}


def post(user, body=BRIEF, key="retry-7f3a"):
    return api_for(user).post(URL, body, format="json", **({} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}))


def test_a_repeated_post_with_its_key_answers_the_first_requirement_and_makes_nothing_more(alice):
    first = post(alice)
    again = post(alice)
    assert first.status_code == again.status_code == 201, again.data
    assert again.data["id"] == first.data["id"] and again["Location"] == first["Location"]
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    requirement = Requirement.objects.get()
    assert requirement.idempotency_keys.get().key == "retry-7f3a"
    # nothing of the intake happened twice: one audit row, one first step
    assert StateTransition.objects.filter(requirement=requirement).count() == 1
    assert Step.objects.filter(requirement=requirement).count() == 1


def test_a_repeat_is_compared_as_the_first_was_stored(alice, acme_project):
    """Stripped, the title cut at 200 characters, the project the first one resolved to (the user's only one)."""
    from lifecycle.services.intake import requirement_submit_once

    submission = {"brief": "  A reading list\n", "title": " " + "t" * 210}
    first = requirement_submit_once(user=alice, idempotency_key="k", **submission)
    again = requirement_submit_once(user=alice, idempotency_key="k", project=acme_project, **submission)
    assert (first.replayed, again.replayed, again.requirement.pk) == (False, True, first.requirement.pk)
    assert (first.requirement.brief, len(first.requirement.title)) == ("A reading list", 200)


@pytest.mark.parametrize("changed", [{"brief": "A todo app"}, {"title": "Other"}, {"playbook": "bug_fix"}])
def test_the_key_with_another_submission_is_422_and_makes_nothing(alice, changed):
    first = post(alice)
    response = post(alice, BRIEF | changed)
    assert response.status_code == 422 and "Idempotency-Key" in response.data, response.data
    assert first.data["id"] not in response.data["Idempotency-Key"][0]  # it may be another organization's
    assert Requirement.objects.count() == 1


def test_the_key_with_another_project_is_422(alice, acme, acme_project):
    other = ProjectFactory(organization=acme, slug="other")
    assert post(alice, BRIEF | {"project": str(other.pk)}).status_code == 201
    response = post(alice, BRIEF | {"project": str(acme.projects.get(slug="default").pk)})
    assert response.status_code == 422 and Requirement.objects.count() == 1
    again = post(alice, BRIEF | {"project": str(other.pk)})
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"


@pytest.mark.parametrize("key", ["", "x" * 256, "clé", "tab\there"])
def test_a_malformed_key_is_400_with_the_header_named(alice, key):
    response = post(alice, key=key)
    assert response.status_code == 400 and "Idempotency-Key" in response.data, response.data
    assert not Requirement.objects.exists()


def test_a_key_of_255_printable_characters_is_accepted(alice):
    key = ("~ !" * 85)[:255]
    assert post(alice, key=key).status_code == 201
    assert Requirement.objects.get().idempotency_keys.get().key == key


def test_a_key_replays_nothing_of_an_organization_the_user_has_left(alice, acme, globex):
    """alice's only project was acme's; now it is globex's: the same body and key, naming no project, is another
    submission (globex's project), so she is told the key was used, and acme's requirement is not shown."""
    from tests.factories import MembershipFactory, ProjectFactory

    first = post(alice)
    alice.memberships.all().delete()
    ProjectFactory(organization=globex, slug="default")
    MembershipFactory(organization=globex, user=alice, role="submitter")
    response = post(alice)
    assert response.status_code == 422 and "id" not in response.data, response.data
    assert first.data["id"] not in str(response.data)
    assert Requirement.objects.count() == 1


def test_keys_belong_to_their_submitter(alice, sam):
    mine, theirs = post(alice), post(sam)
    assert mine.status_code == theirs.status_code == 201 and mine.data["id"] != theirs.data["id"]
    assert "Idempotent-Replayed" not in theirs


def test_without_a_key_or_with_a_new_one_each_post_is_a_new_requirement(alice):
    ids = {post(alice, key=None).data["id"], post(alice, key=None).data["id"], post(alice, key="a").data["id"],
           post(alice, key="b").data["id"]}
    assert len(ids) == 4 and Requirement.objects.count() == 4


def test_a_body_error_is_400_before_the_key_is_looked_at(alice):
    post(alice)
    response = post(alice, {"brief": ""})
    assert response.status_code == 400 and "brief" in response.data
