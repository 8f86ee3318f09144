"""POST /api/v1/requirements/ takes a `ticket` instead of a `brief`: its body is the brief, its source, key and URL
are typed fields shown in the API and the admin, and one ticket has one live requirement per project (a database
constraint: the second submission gets the first back with 200)."""
import pytest
from django.db import IntegrityError, transaction

from lifecycle.models import Requirement, StateTransition
from lifecycle.tickets import Ticket
from tests.conftest import api_for, staff_client
from tests.factories import MembershipFactory, ProjectFactory

pytestmark = pytest.mark.django_db
URL = "/api/v1/requirements/"
BODY = "count_words('') raises IndexError; it should return 0 for empty or blank text."
TICKET = {"source": "github", "key": "#42", "url": "https://github.com/acme/wordcount/issues/42",
          "title": "count_words crashes on empty input", "body": BODY}


def post(user, payload: dict, **headers):
    return api_for(user).post(URL, payload, format="json", **headers)


def test_a_ticket_becomes_a_requirement_whose_brief_is_its_body(alice, acme_project):
    response = post(alice, {"ticket": TICKET})
    assert response.status_code == 201, response.data
    assert response.data["ticket"] == {"source": "github", "key": "#42", "url": TICKET["url"]}
    assert response.data["title"] == TICKET["title"] and response.data["brief"] == BODY
    requirement = Requirement.objects.get(pk=response.data["id"])
    assert (requirement.ticket_source, requirement.ticket_key, requirement.project) == ("github", "#42", acme_project)
    assert requirement.submitted_by == alice and requirement.transitions.get().via == "api"
    shown = api_for(alice).get(f"{URL}{requirement.pk}/").data
    assert shown["ticket"]["key"] == "#42" and api_for(alice).get(URL).data["results"][0]["ticket"]["source"] == "github"


def test_a_brief_has_no_ticket_in_the_output(alice):
    assert post(alice, {"brief": "A reading list"}).data["ticket"] is None


def test_a_ticket_without_body_is_briefed_by_its_title_and_the_source_defaults_to_api(alice):
    response = post(alice, {"ticket": {"key": "SUP-1", "title": "Export the list as CSV"}})
    assert response.status_code == 201, response.data
    assert response.data["brief"] == "Export the list as CSV" and response.data["ticket"]["source"] == "api"


@pytest.mark.parametrize(("payload", "errors"), [
    ({"brief": "A list", "ticket": TICKET}, {"ticket": ["send a brief or a ticket, not both"]}),
    ({"brief": "x", "ticket": {"key": "#1"}}, {"ticket": ["send a brief or a ticket, not both"]}),  # whatever it holds
    ({"title": "nothing else"}, {"brief": ["This field is required (or send a ticket)."]}),
    ({"ticket": TICKET, "title": "x"}, {"title": ["a ticket's title goes in ticket.title"]}),
    ({"ticket": {**TICKET, "key": "42"}}, {"ticket": {"key": ["a github ticket key is #<issue number>, e.g. #42"]}}),
    ({"ticket": {**TICKET, "source": "jira", "key": "proj-7"}},
     {"ticket": {"key": ["a jira ticket key is <PROJECT>-<number>, e.g. PROJ-7"]}}),
    ({"ticket": {**TICKET, "url": "javascript:alert(1)"}},
     {"ticket": {"url": ["a ticket URL is an http:// or https:// address"]}}),
    ({"ticket": {**TICKET, "source": "svn"}}, {"ticket": {"source": ['"svn" is not a valid choice.']}}),
    ({"ticket": {**TICKET, "source": "cli"}}, {"ticket": {"source": ['"cli" is not a valid choice.']}}),  # ADR 42
    ({"ticket": {**TICKET, "playbook": "bug_fix", "project": "x"}},
     {"ticket": {"playbook": ["unknown field"], "project": ["unknown field"]}}),
    ({"ticket": {**TICKET, "key": 42}}, {"ticket": {"key": ["Not a valid string."]}}),
    ({"ticket": {"key": "#1", "source": "gitlab"}}, {"ticket": {"body": ["a ticket needs a body or a title"]}}),
    ({"ticket": "#42"}, {"ticket": {"non_field_errors": ["Invalid data. Expected a dictionary, but got str."]}}),
])
def test_a_bad_ticket_is_a_400_naming_the_field(alice, payload, errors):
    response = post(alice, payload)
    assert response.status_code == 400 and response.json() == errors
    assert not Requirement.objects.exists()


def test_a_body_longer_than_a_brief_may_be_is_refused(alice, settings):
    response = post(alice, {"ticket": {**TICKET, "body": "x" * (settings.AITEAM_BRIEF_MAX_CHARS + 1)}})
    assert response.status_code == 400 and "body" in response.json()["ticket"]


def test_the_same_ticket_again_gets_its_live_requirement_and_a_finished_one_frees_it(alice, acme_project):
    first = post(alice, {"ticket": TICKET})
    again = post(alice, {"ticket": {**TICKET, "title": "edited title", "body": "edited body"}})
    assert again.status_code == 200 and again.data["id"] == first.data["id"] and again.data["brief"] == BODY
    assert again["Location"].endswith(f"{first.data['id']}/") and Requirement.objects.count() == 1
    assert StateTransition.objects.count() == 1  # nothing was written for the repeat
    Requirement.objects.filter(pk=first.data["id"]).update(state="cancelled")
    later = post(alice, {"ticket": TICKET})
    assert later.status_code == 201 and later.data["id"] != first.data["id"]


def test_another_source_or_project_is_another_ticket(alice, acme_project):
    other = ProjectFactory(organization=acme_project.organization, slug="other")
    here = str(acme_project.pk)
    answers = [post(alice, {"ticket": TICKET, "project": here}),
               post(alice, {"ticket": {**TICKET, "source": "gitlab"}, "project": here}),
               post(alice, {"ticket": TICKET, "project": str(other.pk)})]
    assert [a.status_code for a in answers] == [201, 201, 201] and len({a.data["id"] for a in answers}) == 3


def test_a_member_who_may_not_submit_learns_nothing_of_a_live_ticket(alice, rita):
    post(alice, {"ticket": TICKET})
    response = post(rita, {"ticket": TICKET})  # a reviewer: may read requirements, not submit
    assert response.status_code == 403 and "id" not in response.data


def test_a_repeated_post_with_an_idempotency_key_is_a_replay_not_a_live_ticket(alice):
    first = post(alice, {"ticket": TICKET}, HTTP_IDEMPOTENCY_KEY="k-1")
    again = post(alice, {"ticket": TICKET}, HTTP_IDEMPOTENCY_KEY="k-1")
    assert (again.status_code, again["Idempotent-Replayed"], again.data["id"]) == (201, "true", first.data["id"])
    other = post(alice, {"ticket": {**TICKET, "key": "#43"}}, HTTP_IDEMPOTENCY_KEY="k-1")
    assert other.status_code == 422  # the key with another ticket


def test_a_keyed_post_that_found_the_live_requirement_is_answered_the_same_after_it_ended(alice):
    first = post(alice, {"ticket": TICKET})
    keyed = post(alice, {"ticket": TICKET}, HTTP_IDEMPOTENCY_KEY="k-live")
    assert (keyed.status_code, keyed.data["id"]) == (200, first.data["id"]) and "Idempotent-Replayed" not in keyed
    Requirement.objects.filter(pk=first.data["id"]).update(state="cancelled")
    retry = post(alice, {"ticket": TICKET}, HTTP_IDEMPOTENCY_KEY="k-live")  # its answer was lost: the same one again
    assert (retry.status_code, retry.data["id"], retry["Idempotent-Replayed"]) == (200, first.data["id"], "true")
    assert Requirement.objects.count() == 1
    assert post(alice, {"ticket": {**TICKET, "key": "#43"}}, HTTP_IDEMPOTENCY_KEY="k-live").status_code == 422
    assert post(alice, {"ticket": TICKET}, HTTP_IDEMPOTENCY_KEY="k-new").status_code == 201  # the ended one freed it


def test_the_database_refuses_a_second_live_requirement_for_a_ticket(alice, acme_project):
    post(alice, {"ticket": TICKET})
    with pytest.raises(IntegrityError), transaction.atomic():
        Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b",
                                   ticket_source="github", ticket_key="#42")


def test_the_requirement_admin_page_shows_the_ticket(alice, acme):
    requirement_id = post(alice, {"ticket": TICKET}).data["id"]
    boss = MembershipFactory(organization=acme, role="admin", user__username="boss").user
    page = staff_client(boss).get(f"/admin/lifecycle/requirement/{requirement_id}/change/").content.decode()
    assert "#42" in page and TICKET["url"] in page


def test_the_ticket_brief_falls_back_to_the_title_only_when_the_body_is_blank():
    assert Ticket(source="api", key="A", title="T", body="  ").brief == "T"
    assert Ticket(source="api", key="A", title="T", body=" B ").brief == "B"
