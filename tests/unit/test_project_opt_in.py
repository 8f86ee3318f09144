"""The per-project opt-in to deployments approved by autonomous mode: organization admins set it, over the API or
in the admin; nobody else can (ADR 27)."""
import pytest
from django.contrib.admin.models import LogEntry

from lifecycle.models import Project
from tests.conftest import api_for, staff_client
from tests.factories import MembershipFactory, project_form_data

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ada(acme):
    return MembershipFactory(organization=acme, role="admin", user__username="ada").user


def url(project) -> str:
    return f"/api/v1/projects/{project.pk}/"


def test_a_project_is_not_opted_in_until_an_admin_says_so(acme_project, alice):
    [shown] = api_for(alice).get("/api/v1/projects/").json()["results"]
    assert (shown["id"], shown["autonomous_deployments"]) == (str(acme_project.pk), False)


def test_an_organization_admin_opts_the_project_in_over_the_api_and_it_is_recorded(acme_project, ada):
    response = api_for(ada).patch(url(acme_project), {"autonomous_deployments": True}, format="json")
    assert response.status_code == 200 and response.json()["autonomous_deployments"] is True
    acme_project.refresh_from_db()
    assert acme_project.autonomous_deployments
    entry = LogEntry.objects.get(object_id=str(acme_project.pk))
    assert (entry.user, entry.change_message) == (ada, "autonomous_deployments set to true over the API")


@pytest.mark.parametrize("persona", ["alice", "rita"])
def test_submitters_and_reviewers_may_not_opt_a_project_in(request, acme_project, persona):
    response = api_for(request.getfixturevalue(persona)).patch(url(acme_project), {"autonomous_deployments": True},
                                                               format="json")
    assert response.status_code == 403 and "is not an admin of Acme" in response.json()["detail"]
    assert not Project.objects.get(pk=acme_project.pk).autonomous_deployments


def test_another_organizations_project_is_not_found(acme_project, oscar):
    assert api_for(oscar).patch(url(acme_project), {"autonomous_deployments": True}, format="json").status_code == 404


@pytest.mark.parametrize("body,field", [
    ({"autonomous_deployments": "yes"}, "autonomous_deployments"),
    ({"autonomous_deployments": 1}, "autonomous_deployments"),
    ({}, "autonomous_deployments"),
    ({"autonomous_deployments": True, "settings": {}}, "settings"),
])
def test_anything_but_a_plain_true_or_false_is_refused_with_the_field_named(acme_project, ada, body, field):
    response = api_for(ada).patch(url(acme_project), body, format="json")
    assert response.status_code == 400 and field in response.json()
    assert not Project.objects.get(pk=acme_project.pk).autonomous_deployments


def test_the_admin_project_form_sets_it_for_organization_admins_only(acme_project, ada, rita):
    form = project_form_data(acme_project, autonomous_deployments="on")
    change = f"/admin/lifecycle/project/{acme_project.pk}/change/"
    assert staff_client(rita).post(change, form).status_code == 403
    assert not Project.objects.get(pk=acme_project.pk).autonomous_deployments
    assert staff_client(ada).post(change, form).status_code == 302
    assert Project.objects.get(pk=acme_project.pk).autonomous_deployments
