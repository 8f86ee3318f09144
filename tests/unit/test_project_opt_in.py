"""The API's autonomous_deployments is the project's pre-authorization of deployment_approval:approve (ADR 36):
organization admins grant and withdraw it, over the API or in the Pre-authorizations admin; nobody else can."""
import pytest
from django.contrib.admin.models import LogEntry

from lifecycle.models import ActionPreauthorization, Project
from tests.conftest import api_for, staff_client
from tests.factories import MembershipFactory, project_form_data

pytestmark = pytest.mark.django_db(transaction=True)
DEPLOY = "deployment_approval:approve"


@pytest.fixture
def ada(acme):
    return MembershipFactory(organization=acme, role="admin", user__username="ada").user


def url(project) -> str:
    return f"/api/v1/projects/{project.pk}/"


def granted(project) -> bool:
    return ActionPreauthorization.objects.filter(project=project, action=DEPLOY).exists()


def test_a_project_has_not_pre_authorized_deployments_until_an_admin_says_so(acme_project, alice):
    [shown] = api_for(alice).get("/api/v1/projects/").json()["results"]
    assert (shown["id"], shown["autonomous_deployments"]) == (str(acme_project.pk), False)


def test_the_api_reads_the_pre_authorization_granted_in_the_admin(acme_project, alice, ada):
    ActionPreauthorization.objects.create(project=acme_project, action=DEPLOY, granted_by=ada)
    assert api_for(alice).get(url(acme_project)).json()["autonomous_deployments"] is True


def test_an_organization_admin_grants_it_over_the_api_and_it_is_recorded(acme_project, ada):
    response = api_for(ada).patch(url(acme_project), {"autonomous_deployments": True}, format="json")
    assert response.status_code == 200 and response.json()["autonomous_deployments"] is True
    grant = ActionPreauthorization.objects.get(project=acme_project)
    assert (grant.action, grant.granted_by) == (DEPLOY, ada)
    entry = LogEntry.objects.get(object_id=str(acme_project.pk))
    assert (entry.user, entry.change_message) == (
        ada, f"autonomous_deployments set to true over the API ({DEPLOY} pre-authorized)")


def test_an_organization_admin_withdraws_it_over_the_api(acme_project, ada):
    ActionPreauthorization.objects.create(project=acme_project, action=DEPLOY)
    response = api_for(ada).patch(url(acme_project), {"autonomous_deployments": False}, format="json")
    assert response.status_code == 200 and response.json()["autonomous_deployments"] is False
    assert not granted(acme_project)
    assert LogEntry.objects.get(object_id=str(acme_project.pk)).change_message == (
        f"autonomous_deployments set to false over the API ({DEPLOY} withdrawn)")


def test_saying_what_already_holds_changes_and_records_nothing(acme_project, ada):
    response = api_for(ada).patch(url(acme_project), {"autonomous_deployments": False}, format="json")
    assert response.status_code == 200 and response.json()["autonomous_deployments"] is False
    assert not granted(acme_project) and not LogEntry.objects.exists()


@pytest.mark.parametrize("persona", ["alice", "rita"])
@pytest.mark.parametrize("enabled", [True, False])
def test_submitters_and_reviewers_may_neither_grant_nor_withdraw_it(request, acme_project, persona, enabled):
    if not enabled:
        ActionPreauthorization.objects.create(project=acme_project, action=DEPLOY)
    response = api_for(request.getfixturevalue(persona)).patch(url(acme_project), {"autonomous_deployments": enabled},
                                                               format="json")
    assert response.status_code == 403 and "is not an admin of Acme" in response.json()["detail"]
    assert granted(acme_project) is not enabled


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
    assert not granted(acme_project)


def test_a_field_this_endpoint_does_not_take_is_named_beside_the_one_missing(acme_project, ada):
    response = api_for(ada).patch(url(acme_project), {"name": "x"}, format="json")
    assert response.status_code == 400 and response.json()["name"] == ["unknown field"]
    assert "autonomous_deployments" in response.json()


def test_the_admin_project_form_no_longer_sets_it(acme_project, ada):
    form = project_form_data(acme_project, autonomous_deployments="on")
    change = f"/admin/lifecycle/project/{acme_project.pk}/change/"
    page = staff_client(ada).get(change).content.decode()
    assert 'name="autonomous_deployments"' not in page
    assert staff_client(ada).post(change, form).status_code == 302
    assert Project.objects.filter(pk=acme_project.pk).exists() and not granted(acme_project)


def test_an_organization_admin_withdraws_it_in_the_pre_authorizations_admin(acme_project, ada, rita):
    grant = ActionPreauthorization.objects.create(project=acme_project, action=DEPLOY)
    delete = f"/admin/lifecycle/actionpreauthorization/{grant.pk}/delete/"
    assert staff_client(rita).post(delete, {"post": "yes"}).status_code == 403 and granted(acme_project)
    assert staff_client(ada).post(delete, {"post": "yes"}).status_code == 302
    assert not granted(acme_project)
