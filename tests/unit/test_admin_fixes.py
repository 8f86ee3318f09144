"""The admin outside the inbox's happy path: tenant-scoped filters and choices, malformed ids and query strings,
project settings that are refused with a form error, query counts that do not grow with rows, a masked secret."""
import pytest
from django.contrib.auth.models import Group

from lifecycle.models import Project, Replay, Requirement, ReviewTask, StateTransition
from tests.conftest import staff_client
from tests.factories import MembershipFactory, OrganizationFactory, ProjectFactory
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)
INBOX = "/admin/lifecycle/reviewtask/"
SECRET_HOOK = "https://hooks.example.test/services/T0/B0/secret-token"


@pytest.fixture
def boss(acme):
    return MembershipFactory(organization=acme, role="admin", user__username="boss").user


def requirement_in(project: Project, title: str = "Reading list") -> Requirement:
    return Requirement.objects.create(organization=project.organization, project=project, brief="b", title=title)


def test_the_requirement_filter_lists_only_the_users_organizations(acme_project, rita, oscar, globex):
    initech = OrganizationFactory(slug="initech", name="Initech")
    MembershipFactory(organization=initech, user=rita)
    for project in (acme_project, ProjectFactory(organization=initech), Project.objects.get(organization=globex)):
        requirement_in(project)
    html = staff_client(rita).get("/admin/lifecycle/requirement/").content.decode()
    assert "Acme" in html and "Initech" in html and "Globex" not in html


def test_the_assign_form_offers_only_groups_with_a_member_who_may_decide(acme_project, rita, sam):
    web, sales = Group.objects.create(name="web"), Group.objects.create(name="sales")
    rita.groups.add(web)
    sam.groups.add(sales)
    task = open_review(acme_project)
    client = staff_client(rita)
    html = client.get(f"{INBOX}{task.pk}/change/").content.decode()
    assert f'value="{web.pk}">web</option>' in html and ">sales</option>" not in html
    response = client.post(f"{INBOX}{task.pk}/assign/", {"group": sales.pk}, follow=True)
    assert "Select a valid choice" in response.content.decode()
    task.refresh_from_db()
    assert task.assignee_group is None


def test_a_review_page_for_an_id_that_is_not_a_uuid_is_not_found(rita):
    assert staff_client(rita).get(f"{INBOX}not-a-uuid/change/").status_code == 404


@pytest.mark.parametrize("query", ["project=abc", "status=bogus", "assigned=bogus", "sla=bogus"])
def test_a_filter_value_the_inbox_cannot_read_redirects_to_the_error_flag(acme_project, rita, query):
    open_review(acme_project, title="Waiting one")
    client = staff_client(rita)
    response = client.get(f"{INBOX}?{query}")
    assert (response.status_code, response["Location"]) == (302, f"{INBOX}?e=1")
    assert "Waiting one" in client.get(response["Location"]).content.decode()  # the default inbox


def test_decided_by_policy_from_the_default_inbox_lists_the_policy_decisions(acme_project, rita):
    open_review(acme_project, title="Waiting one")
    by_policy, by_rita = open_review(acme_project, title="Timed out"), open_review(acme_project, title="Rita decided")
    ReviewTask.objects.filter(pk=by_policy.pk).update(state="resolved", decision="reject", decided_by_policy="sla_policy",
                                                      decided_via="policy")
    ReviewTask.objects.filter(pk=by_rita.pk).update(state="resolved", decision="approve", decided_by=rita)
    client = staff_client(rita)
    assert 'href="?sla=by_policy"' in client.get(INBOX).content.decode()  # the sidebar choice from the inbox
    html = client.get(f"{INBOX}?sla=by_policy").content.decode()
    assert ">Timed out<" in html and ">Rita decided<" not in html and ">Waiting one<" not in html
    assert ">Rita decided<" in client.get(f"{INBOX}?status=all").content.decode()
    assert ">Timed out<" not in client.get(f"{INBOX}?sla=by_policy&status=pending").content.decode()  # asked for


def project_form(project: Project, **changes) -> dict:
    return {"name": project.name, "slug": project.slug, "repo_url": project.repo_url, "settings": "{}", **changes}


def test_notifications_that_are_not_an_object_are_a_form_error(acme_project, boss):
    url = f"/admin/lifecycle/project/{acme_project.pk}/change/"
    response = staff_client(boss).post(url, project_form(acme_project, settings='{"notifications": "x"}'))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["settings"] == [
        'notifications must be a JSON object, e.g. {"webhook_url": "https://…"}']


def test_a_slug_another_project_of_the_organization_uses_is_a_form_error_on_slug(acme_project, boss):
    other = ProjectFactory(organization=acme_project.organization, slug="other")
    response = staff_client(boss).post(f"/admin/lifecycle/project/{other.pk}/change/",
                                       project_form(other, slug="default"))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["slug"] == ["another project of this organization is already 'default'"]
    other.refresh_from_db()
    assert other.slug == "other"


@pytest.mark.parametrize("count", [1, 10])
def test_the_project_list_costs_the_same_for_1_or_10_projects(acme, rita, count, django_assert_max_num_queries):
    for i in range(count):
        ProjectFactory(organization=acme, slug=f"p{i}")
    client = staff_client(rita)
    # session, user, membership, two counts, admin-of (twice), the sidebar's permissions (two), the rows
    with django_assert_max_num_queries(10):
        response = client.get("/admin/lifecycle/project/")
    assert response.content.decode().count("acme/p") == count


@pytest.mark.parametrize("count", [1, 10])
def test_the_requirement_page_costs_the_same_for_1_or_10_transitions_and_replays(
        acme_project, rita, count, django_assert_max_num_queries):
    source = requirement_in(acme_project, title="Source run")
    for i in range(count):
        StateTransition.objects.create(requirement=source, subject_id=str(source.pk), event=f"event{i}",
                                       from_state="a", to_state="b", actor_user=rita, via="api")
        replay = Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b",
                                            title=f"replay {i}", replay_of=source)
        Replay.objects.create(requirement=replay, via="admin")
    client = staff_client(rita)
    with django_assert_max_num_queries(20):  # the page, its inlines and the replay list: none grows with the rows
        response = client.get(f"/admin/lifecycle/requirement/{source.pk}/change/")
    html = response.content.decode()
    assert response.status_code == 200 and html.count("event") >= count and html.count(": running (") == count


def test_the_webhook_url_is_masked_for_members_who_are_not_admins(acme_project, rita, boss):
    acme_project.settings = {"notifications": {"webhook_url": SECRET_HOOK}, "reviewers_group": ""}
    acme_project.save()
    url = f"/admin/lifecycle/project/{acme_project.pk}/change/"
    shown_to_reviewer = staff_client(rita).get(url).content.decode()
    assert "secret-token" not in shown_to_reviewer and "shown to the organization&#x27;s admins only" in shown_to_reviewer
    assert "secret-token" in staff_client(boss).get(url).content.decode()
