"""The budget task in the admin review inbox: spend against limits, the four options by name, and each
option's fields posted through the same review_decide the API uses."""
import json
from datetime import timedelta

import pytest

from lifecycle.models import Requirement, StateTransition
from lifecycle.services.sla import review_sweep
from tests.conftest import staff_client
from tests.flows import decide, fresh, pending, submit

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def budget_task(alice, rita, acme_project):
    acme_project.settings = {"budgets": {"roles": {"tech_lead": {"steps": 1}}}}
    acme_project.save()
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    return pending(req, "budget_exhausted")


def url(task, action: str = "change") -> str:
    return f"/admin/lifecycle/reviewtask/{task.pk}/{action}/"


def test_the_review_page_shows_spend_and_names_the_options(budget_task, rita):
    html = staff_client(rita).get(url(budget_task)).content.decode()
    assert 'id="budget"' in html and "role:tech_lead" in html and "1 / 1 (0 left)" in html
    for label in ("Override the budget", "Inject a constraint", "Terminate"):
        assert label in html
    assert "Approve the partial output" not in html  # a plan step has none
    assert 'name="budget"' in html and "&quot;tech_lead&quot;: {" in html  # the suggested override, escaped
    assert 'name="constraint"' in html


def test_override_from_the_form_takes_the_json_limits(budget_task, rita):
    response = staff_client(rita).post(url(budget_task, "decide"), {
        "decision": "override_budget", "budget": json.dumps({"roles": {"tech_lead": {"steps": 20}}}),
        "reason": "", "constraint": "ignored unless injecting"})
    assert response.status_code == 302
    req = Requirement.objects.get(pk=budget_task.requirement_id)
    assert req.budget_overrides["roles"]["tech_lead"] == {"steps": 20}
    assert req.state == "ready_to_deploy" and req.injected_constraints == []


def test_inject_from_the_form_ignores_the_prefilled_limits(budget_task, rita):
    staff_client(rita).post(url(budget_task, "decide"), {
        "decision": "inject_constraint", "constraint": "No new dependencies", "budget": '{"roles": {}}'})
    task = fresh(budget_task.requirement).review_tasks.get(kind="budget_exhausted", round=1)
    assert (task.decision, task.feedback, task.decision_data, task.decided_via) == (
        "inject_constraint", "No new dependencies", {}, "admin")


def test_malformed_limits_are_refused_on_the_page_with_what_was_typed(budget_task, rita):
    client = staff_client(rita)
    response = client.post(url(budget_task, "decide"), {"decision": "override_budget", "budget": "{steps: 3"})
    html = response.content.decode()
    assert response.status_code == 400 and "Enter a valid JSON" in html and ">{steps: 3</textarea>" in html
    response = client.post(url(budget_task, "decide"), {"decision": "override_budget",
                                                        "budget": '{"roles": {"tech_lead": {"steps": "many"}}}'})
    html = response.content.decode()
    assert response.status_code == 400 and "roles.tech_lead.steps: expected a whole number" in html.lower()
    assert "&quot;steps&quot;: &quot;many&quot;" in html  # the limits as typed, not the suggestion again
    assert pending(budget_task.requirement, "budget_exhausted").pk == budget_task.pk


def test_a_refused_terminate_keeps_the_edited_limits_in_the_box(budget_task, rita):
    response = staff_client(rita).post(url(budget_task, "decide"), {
        "decision": "reject", "reason": "", "budget": '{"roles": {"tech_lead": {"steps": 7}}}'})
    html = response.content.decode()
    assert response.status_code == 400 and "needs a reason" in html
    assert "{&quot;roles&quot;: {&quot;tech_lead&quot;: {&quot;steps&quot;: 7}}}</textarea>" in html


@pytest.mark.parametrize("decision,fields", [("reject", {"reason": "too costly"}),
                                             ("inject_constraint", {"constraint": "No new dependencies"})])
def test_malformed_limits_do_not_block_another_decision(budget_task, rita, decision, fields):
    response = staff_client(rita).post(url(budget_task, "decide"), {"decision": decision, "budget": "{steps: 3",
                                                                    **fields})
    assert response.status_code == 302
    task = fresh(budget_task.requirement).review_tasks.get(kind="budget_exhausted", round=1)
    assert (task.state, task.decision, task.decision_data) == ("resolved", decision, {})


def test_terminate_from_the_form_cancels(budget_task, rita):
    staff_client(rita).post(url(budget_task, "decide"), {"decision": "reject", "reason": "too costly"})
    assert Requirement.objects.get(pk=budget_task.requirement_id).state == "cancelled"


def test_the_requirement_page_shows_spend_against_limits(budget_task, rita):
    html = staff_client(rita).get(f"/admin/lifecycle/requirement/{budget_task.requirement_id}/change/").content.decode()
    assert "budget: spent / limit" in html.lower() and "Paused</b> in design_ready" in html
    assert "role:tech_lead" in html and "1 / 1 (0 left)" in html


def test_a_policy_default_the_task_does_not_offer_gives_way_to_reject(alice, rita, acme_project):
    """The policy's check at save cannot know that this budget task has no partial output to approve: at the limit
    the policy rejects (the safe default), and the page and the audit row say so instead of promising approval."""
    acme_project.settings = {"budgets": {"roles": {"tech_lead": {"steps": 1}}}, "review_policies": {
        "budget_exhausted": {"default_decision": "approve", "default_reason": "ship what we have"}}}
    acme_project.save()
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    task = pending(req, "budget_exhausted")
    assert "approve" not in task.options

    html = staff_client(rita).get(url(task)).content.decode()
    assert "the policy will <b>reject</b> it" in html and "its default, approve, is not an option" in html

    assert review_sweep(now=task.decide_by + timedelta(minutes=1)) == {"auto_decide": 1}
    task.refresh_from_db()
    assert (task.decision, task.decided_by_policy) == ("reject", "sla_policy")
    assert fresh(req).state == "cancelled"
    resolve = StateTransition.objects.get(subject="review_task", subject_id=str(task.pk), event="resolve")
    assert "could not apply its stated default, approve" in resolve.metadata["reason"]
