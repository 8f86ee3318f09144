"""SLA policies: a default per review kind, overridden per project, stated on each task when it opens, validated loudly."""
from datetime import timedelta

import pytest
from django.core.checks import run_checks
from django.test import Client
from django.utils import timezone

from lifecycle.services.sla_policies import ReviewPolicy, policy_for, policy_problems
from lifecycle.states import ReviewKind
from tests.factories import MembershipFactory, project_form_data
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)


def close_to(value, expected, seconds=60):
    return abs((value - expected).total_seconds()) < seconds


def test_defaults_stories_a_day_deployment_four_hours():
    stories, deployment = policy_for("stories_approval"), policy_for("deployment_approval")
    assert (stories.sla_hours, stories.action, stories.decide_after_hours, stories.default_decision) == (
        24, "remind", 72, "reject")
    assert (deployment.sla_hours, deployment.action) == (4, "escalate")


def test_a_task_states_its_policy_when_it_opens(acme_project, rita):
    task = open_review(acme_project)
    now = timezone.now()
    assert close_to(task.sla_deadline, now + timedelta(hours=24)) and close_to(task.decide_by, now + timedelta(hours=72))
    assert task.next_sweep_at == task.sla_deadline and task.escalation_policy == "remind"
    assert task.policy == ReviewPolicy(sla_hours=24).model_dump()


def test_a_project_overrides_the_sla_and_open_tasks_keep_their_promise(acme_project, rita):
    acme_project.settings = {"review_policies": {"*": {"remind_every_hours": 1},
                                                 "stories_approval": {"sla_hours": 8, "action": "escalate"}}}
    acme_project.save()
    task = open_review(acme_project)
    assert close_to(task.sla_deadline, timezone.now() + timedelta(hours=8))
    assert (task.escalation_policy, task.policy["remind_every_hours"]) == ("escalate", 1)

    acme_project.settings = {"review_policies": {"stories_approval": {"sla_hours": 1}}}
    acme_project.save()
    task.refresh_from_db()
    assert task.policy["sla_hours"] == 8


def test_a_broken_project_override_falls_back_to_the_defaults_and_says_so(caplog):
    policy = policy_for("stories_approval", {"review_policies": {"stories_approval": {"action": "reassign"}}})
    assert policy.action == "remind" and "invalid, using the defaults" in caplog.text


@pytest.mark.parametrize("overrides,problem", [
    ({"stories_approval": {"action": "reassign"}}, "action 'reassign' needs a group"),
    ({"stories": {}}, "unknown review kind 'stories'"),
    ({"clarification": {"default_decision": "approve"}}, "'approve' is not an option (answer, reject)"),
    ({"deployment_approval": {"default_decision": "approve"}}, "never approved by policy"),
    ({"*": {"sla_hours": 10, "decide_after_hours": 5}}, "decide_after_hours must not be shorter"),
    ({"*": {"sla_hours": 0}}, "sla_hours: Input should be greater than 0"),
    ({"*": {"slahours": 3}}, "slahours: Extra inputs are not permitted"),
    (["not", "a", "mapping"], "must be a mapping"),
    ({"*": {"sla_hours": 1e9, "decide_after_hours": 1e9}}, "sla_hours: Input should be less than or equal to 8760"),
    ({"*": {"remind_every_hours": 1e9}}, "remind_every_hours: Input should be less than or equal to 8760"),
    ({"*": {"decide_after_hours": float("inf")}}, "decide_after_hours: Input should be a finite number"),
    ({"*": {"remind_every_hours": float("nan")}}, "remind_every_hours: Input should be a finite number"),
])
def test_invalid_policies_are_named(overrides, problem):
    assert any(problem in p for p in policy_problems(overrides)), policy_problems(overrides)


def test_a_year_is_the_longest_policy_hours_allowed():
    assert ReviewPolicy(sla_hours=24 * 365, decide_after_hours=24 * 365, remind_every_hours=24 * 365).sla_hours == 8760


def test_a_huge_project_sla_falls_back_to_the_defaults_instead_of_breaking_every_gate(acme_project, rita, caplog):
    acme_project.settings = {"review_policies": {"*": {"sla_hours": 1e9, "decide_after_hours": 1e9}}}
    acme_project.save()
    task = open_review(acme_project)
    assert close_to(task.sla_deadline, timezone.now() + timedelta(hours=24)) and task.policy["sla_hours"] == 24
    assert "invalid, using the defaults" in caplog.text


def test_the_settings_are_checked_at_startup(settings):
    assert not [e for e in run_checks() if e.id == "aiteam.E002"]
    settings.AITEAM_REVIEW_POLICIES = {"*": {"action": "teleport"}}
    assert [e.id for e in run_checks() if e.id.startswith("aiteam")] == ["aiteam.E002"] * len(ReviewKind.values)  # one per kind


def test_an_org_admin_edits_project_policies_in_the_admin_and_bad_ones_are_refused(acme_project, rita):
    boss = MembershipFactory(organization=acme_project.organization, role="admin", user__username="boss",
                             user__is_staff=True).user
    client = Client()
    client.force_login(boss)
    url = f"/admin/lifecycle/project/{acme_project.pk}/change/"
    fields = project_form_data(acme_project, name="Default")
    bad = client.post(url, {**fields, "settings": '{"review_policies": {"stories_approval": {"action": "reassign"}}}'})
    assert "action &#x27;reassign&#x27; needs a group" in bad.content.decode()
    good = client.post(url, {**fields, "settings": '{"review_policies": {"deployment_approval": {"sla_hours": 2}}}'})
    assert good.status_code == 302
    acme_project.refresh_from_db()
    assert policy_for("deployment_approval", acme_project.settings).sla_hours == 2

    rita.is_staff = True
    rita.save()
    client.force_login(rita)  # a reviewer, not an admin of the organization
    assert client.post(url, {**fields, "settings": "{}"}).status_code == 403
