"""The admin outside the review inbox: requirements and projects scoped to the user's organizations, project
settings refused with a form error, a masked webhook secret, pages whose query count does not grow with rows, and
operator-only pages that model permissions do not open."""
import json

import pytest
from django.contrib.auth.models import Permission

from lifecycle.models import Project, Replay, Requirement, StateTransition
from tests.conftest import staff_client
from tests.factories import MembershipFactory, OrganizationFactory, ProjectFactory, project_form_data

pytestmark = pytest.mark.django_db(transaction=True)
SECRET_HOOK = "https://hooks.example.test/services/T0/B0/secret-token"


@pytest.fixture
def boss(acme):
    return MembershipFactory(organization=acme, role="admin", user__username="boss").user


def requirement_in(project: Project, title: str = "Reading list") -> Requirement:
    return Requirement.objects.create(organization=project.organization, project=project, brief="b", title=title)


def project_form(project: Project, **changes) -> dict:
    return project_form_data(project, **changes)


# --- Requirements.

def test_the_requirement_filter_lists_only_the_users_organizations(acme_project, rita, oscar, globex):
    initech = OrganizationFactory(slug="initech", name="Initech")
    MembershipFactory(organization=initech, user=rita)
    for project in (acme_project, ProjectFactory(organization=initech), Project.objects.get(organization=globex)):
        requirement_in(project)
    html = staff_client(rita).get("/admin/lifecycle/requirement/").content.decode()
    assert "Acme" in html and "Initech" in html and "Globex" not in html


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
    # the page, its inlines, the replay list, the header's unread count and the "Ask" panel's conversation: none
    # grows with the rows
    with django_assert_max_num_queries(22):
        response = client.get(f"/admin/lifecycle/requirement/{source.pk}/change/")
    html = response.content.decode()
    assert response.status_code == 200 and html.count("event") >= count and html.count(": running (") == count


# --- Projects.

def test_project_notifications_that_are_not_an_object_are_a_form_error(acme_project, boss):
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


def test_the_webhook_url_is_masked_for_members_who_are_not_admins(acme_project, rita, boss):
    acme_project.settings = {"notifications": {"webhook_url": SECRET_HOOK}, "reviewers_group": ""}
    acme_project.save()
    url = f"/admin/lifecycle/project/{acme_project.pk}/change/"
    shown_to_reviewer = staff_client(rita).get(url).content.decode()
    assert "secret-token" not in shown_to_reviewer and "shown to the organization&#x27;s admins only" in shown_to_reviewer
    assert "secret-token" in staff_client(boss).get(url).content.decode()


def test_saving_a_project_warns_of_sla_managers_and_groups_who_may_not_decide_its_tasks(acme_project, boss, rita,
                                                                                          sam):
    """The save goes through; each manager or group the SLA sweep would pass over is named with why, and with
    what happens to an overdue task instead. rita, a reviewer, may decide: nothing is said of her."""
    from django.contrib.auth.models import Group

    Group.objects.create(name="submitters").user_set.add(sam)
    Group.objects.create(name="web-reviewers").user_set.add(rita)
    policies = {"deployment_approval": {"action": "escalate", "manager": "sam"},
                "design_review": {"action": "escalate", "manager": "sam"},
                "code_review": {"action": "escalate", "manager": "rita"},
                "clarification": {"action": "escalate", "manager": "ghost"},
                "stories_approval": {"action": "reassign", "group": "submitters"},
                "step_failed": {"action": "reassign", "group": "gone"},
                "escalation": {"action": "reassign", "group": "web-reviewers"}}
    url = f"/admin/lifecycle/project/{acme_project.pk}/change/"
    response = staff_client(boss).post(url, project_form(acme_project, settings=json.dumps(
        {"review_policies": policies})), follow=True)

    assert response.status_code == 200
    acme_project.refresh_from_db()
    assert acme_project.settings["review_policies"] == policies  # saved all the same
    warnings = [str(m) for m in response.context["messages"] if m.level_tag == "warning"]
    assert warnings == [
        "The SLA policy of clarification escalates to ghost, who may not decide this project's review tasks: ghost "
        "is not an active user. An overdue task goes to everyone who may decide it instead.",
        "The SLA policy of stories_approval reassigns to the group submitters, which cannot take this project's "
        "review tasks: no member of 'submitters' may decide them. An overdue task goes to everyone who may decide "
        "it instead.",
        "The SLA policy of step_failed reassigns to the group gone, which cannot take this project's review tasks: "
        "there is no group 'gone'. An overdue task gets reminders instead.",
        "The SLA policy of design_review, deployment_approval escalates to sam, who may not decide this project's "
        "review tasks: sam has no reviewer role in Acme and may not decide its review tasks. An overdue task goes to "
        "everyone who may decide it instead.",
    ]


@pytest.mark.parametrize("count", [1, 10])
def test_the_project_list_costs_the_same_for_1_or_10_projects(acme, rita, count, django_assert_max_num_queries):
    for i in range(count):
        ProjectFactory(organization=acme, slug=f"p{i}")
    client = staff_client(rita)
    # session, user, membership, two counts, admin-of (twice), the sidebar's permissions (two), the rows, the
    # header's unread count
    with django_assert_max_num_queries(11):
        response = client.get("/admin/lifecycle/project/")
    assert response.content.decode().count("acme/p") == count


# --- Operator-only pages.

def test_staff_with_model_permissions_still_cannot_open_operator_only_pages(rita):
    rita.user_permissions.add(*Permission.objects.filter(codename__in=["view_llmcall", "change_membership"]))
    client = staff_client(rita)
    assert client.get("/admin/lifecycle/llmcall/").status_code == 403  # other tenants' LLM calls
    assert client.get("/admin/lifecycle/membership/add/").status_code == 403
