"""The budget gate on the embedded default: a budget runs out mid-flow, and each of the four options
(override, inject a constraint, approve partial output, terminate) does what it says — through the
same review_decide the admin and the API use. Also the API's validation and the autonomous policy."""
import pytest

from lifecycle.models import Requirement, Step
from tests.conftest import api_for
from tests.flows import decide, fresh, pending, submit, transitions

pytestmark = pytest.mark.django_db(transaction=True)
CONSTRAINT = "Keep every module under 200 lines"


def budgeted(project, budget: dict) -> None:
    project.settings = {**project.settings, "budgets": budget}
    project.save()


def run_out_at_the_plan(alice, rita, project) -> Requirement:
    """The tech lead may run one step: the design review runs, the plan is stopped in design_ready."""
    budgeted(project, {"roles": {"tech_lead": {"steps": 1}}})
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    return fresh(req)


def events(req) -> list[str]:
    return [t[1] for t in transitions(req)]


def test_a_spent_budget_escalates_with_a_task_saying_what_was_spent_and_what_remains(alice, rita, acme_project):
    req = run_out_at_the_plan(alice, rita, acme_project)
    assert (req.state, req.budget_paused_from) == ("escalated", "design_ready")
    assert events(req)[-2:] == ["approve_design", "exhaust_budget"]
    plan = Step.objects.get(requirement=req, key="tl_plan")
    assert plan.state == "skipped" and "role:tech_lead steps 1/1" in plan.error
    assert req.llm_calls.filter(role="tech_lead").count() == 1  # the design review; the plan never called the model
    task = pending(req, "budget_exhausted")
    assert task.context["budget"]["role:tech_lead"]["steps"] == {"limit": 1, "spent": 1, "remaining": 0}
    assert task.options == ["override_budget", "inject_constraint", "reject"]


def test_override_sets_new_limits_and_the_stopped_step_runs_again(alice, rita, acme_project):
    req = run_out_at_the_plan(alice, rita, acme_project)
    decide(pending(req, "budget_exhausted"), rita, "override_budget", budget={"roles": {"tech_lead": {"steps": None}}})
    req = fresh(req)
    assert req.state == "ready_to_deploy"
    assert events(req) == ["submit", "clarify", "create_stories", "approve_design", "exhaust_budget", "resume_budget",
                           "start_development", "retry_development", "submit_for_review", "pass_code_review",
                           "pass_quality_gate"]
    resumed = req.transitions.get(event="resume_budget")
    assert (resumed.from_state, resumed.to_state, resumed.actor_user) == ("escalated", "design_ready", rita)
    assert req.budget_overrides == {"requirement": {}, "roles": {"tech_lead": {"steps": None}}}
    plan = Step.objects.get(requirement=req, key="tl_plan")
    assert (plan.state, plan.runs) == ("done", 1)  # the same step row, run once more
    assert req.review_tasks.get(kind="budget_exhausted").decision_data == {"budget": {"roles": {"tech_lead": {"steps": None}}}}


def test_an_override_that_leaves_no_room_is_refused_and_changes_nothing(alice, rita, acme_project):
    req = run_out_at_the_plan(alice, rita, acme_project)
    task = pending(req, "budget_exhausted")
    response = api_for(rita).post(f"/api/v1/review-tasks/{task.pk}/decision/",
                                  {"decision": "override_budget", "budget": {"roles": {"tech_lead": {"steps": 1}}}},
                                  format="json")
    assert response.status_code == 400
    assert "leave no room: role:tech_lead steps 1/1" in response.json()["budget"][0]
    assert fresh(req).state == "escalated" and pending(req, "budget_exhausted").is_pending


def test_inject_constraint_reaches_every_later_step_and_continues_with_a_grace(alice, rita, acme_project):
    req = run_out_at_the_plan(alice, rita, acme_project)
    decide(pending(req, "budget_exhausted"), rita, "inject_constraint", constraint=CONSTRAINT)
    req = fresh(req)
    assert req.injected_constraints == [CONSTRAINT]
    assert req.budget_overrides["roles"]["tech_lead"] == {"steps": 2}  # spent 1 + half the limit (at least 1)
    later = req.llm_calls.filter(role__in=["tech_lead", "senior_engineer"]).order_by("id")
    assert later.exists()
    assert all(CONSTRAINT in str(c.messages) for c in later if c.step.key != "tl_design_review")
    # the grace covered the plan; the code review is the tech lead's third step: the gate stops it in in_review
    assert (req.state, req.budget_paused_from) == ("escalated", "in_review")
    assert events(req).count("exhaust_budget") == 2


def test_approve_partial_output_accepts_the_spec_without_its_review(alice, rita, acme_project):
    budgeted(acme_project, {"roles": {"tech_lead": {"steps": 0}}})
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    req = fresh(req)
    assert (req.state, req.budget_paused_from) == ("escalated", "user_stories_created")
    task = pending(req, "budget_exhausted")
    assert "approve" in task.options and "spec is approved" in task.context["partial_output"]
    decide(task, rita, "approve")
    req = fresh(req)
    approved = req.transitions.get(event="approve_design")
    assert approved.actor_user == rita  # the human accepted the spec in place of the tech lead's review
    assert req.artifacts.get(kind="technical_spec").approved
    assert Step.objects.get(requirement=req, key="tl_design_review").error.startswith("dropped: partial output")
    assert events(req)[3:7] == ["exhaust_budget", "resume_budget", "approve_design", "start_development"]
    # the grace (one more tech lead step) paid for the plan; the code review stops again, and its partial
    # output (the code as it is) can be approved too
    code = pending(req, "budget_exhausted")
    assert code.context["step"] == "tl_code_review" and "approve" in code.options
    decide(code, rita, "approve")
    req = fresh(req)
    assert req.state == "ready_to_deploy"
    assert req.transitions.get(event="pass_code_review").actor_user == rita


def test_terminate_cancels_and_nothing_runs_after(alice, rita, acme_project):
    req = run_out_at_the_plan(alice, rita, acme_project)
    decide(pending(req, "budget_exhausted"), rita, "reject", reason="not worth more money")
    req = fresh(req)
    assert req.state == "cancelled" and events(req)[-1] == "cancel"
    assert Step.objects.get(requirement=req, key="tl_plan").state == "skipped"
    assert not req.plan_tasks.exists() and not req.review_tasks.pending().exists()


@pytest.mark.parametrize("body,field,message", [
    ({"decision": "override_budget"}, "budget", "needs the new limits"),
    ({"decision": "override_budget", "budget": "more"}, "budget", "dictionary"),
    ({"decision": "override_budget", "budget": {"roles": {"tech_lead": {"steps": -3}}}}, "budget", "whole number"),
    ({"decision": "inject_constraint"}, "constraint", "needs a constraint"),
    ({"decision": "inject_constraint", "constraint": "x", "budget": {}}, "budget", "only an 'override_budget'"),
    ({"decision": "reject"}, "reason", "needs a reason"),
    ({"decision": "approve"}, "decision", "not an option"),
    ({"decision": "request_changes", "feedback": "x"}, "decision", "not an option"),
    ({"decision": "inject_constraint", "constraint": "x", "feedback": "thanks"}, "feedback",
     "a 'inject_constraint' decision does not take feedback; it takes constraint or reason"),
    ({"decision": "reject", "reason": "x", "answer": "y"}, "answer", "a 'reject' decision does not take answer"),
])
def test_the_api_validates_each_option_and_its_fields(alice, rita, acme_project, body, field, message):
    req = run_out_at_the_plan(alice, rita, acme_project)
    response = api_for(rita).post(f"/api/v1/review-tasks/{pending(req, 'budget_exhausted').pk}/decision/", body,
                                  format="json")
    assert response.status_code == 400
    assert message in str(response.json()[field])


HOSTILE_BUDGETS = [  # each refused with 400 on "budget", naming the field and, when it is too large, its maximum
    ({"requirement": {"cost_usd": "1e22"}}, "requirement.cost_usd: at most 1000000 dollars (null: unlimited)"),
    ({"requirement": {"tokens": 10**40}}, "requirement.tokens: at most 10000000000 tokens (null: unlimited)"),
    ({"roles": {"tech_lead": {"steps": 10**6}}}, "roles.tech_lead.steps: at most 100000 steps"),
    ({"roles": {"sandbox": {"sandbox_runs": 100_001}}}, "roles.sandbox.sandbox_runs: at most 100000 sandbox runs"),
    ({"requirement": {"cost_usd": "0.0000001"}}, "requirement.cost_usd: at most 6 decimal places"),
    ({"requirement": {"cost_usd": "NaN"}}, "requirement.cost_usd: expected a number of dollars"),
    ({"requirement": {"cost_usd": "-Infinity"}}, "requirement.cost_usd: expected a number of dollars"),
    ({"requirement": {"tokens": True}}, "requirement.tokens: expected a whole number"),
    ({"requirement": {"cost_usd": {"$gt": 0}}}, "requirement.cost_usd: expected a number of dollars"),
    ({"roles": {"tech_lead": {"steps": {"steps": None}}}}, "roles.tech_lead.steps: expected a whole number"),
]


def test_the_api_refuses_a_limit_beyond_its_maximum_and_the_requirement_still_renders(alice, rita, acme_project):
    """The hostile-input audit: a 1e22 dollar override answered 200, then every read of the requirement 500."""
    req = run_out_at_the_plan(alice, rita, acme_project)
    task = pending(req, "budget_exhausted")
    url, client = f"/api/v1/review-tasks/{task.pk}/decision/", api_for(rita)
    for budget, message in HOSTILE_BUDGETS:
        response = client.post(url, {"decision": "override_budget", "budget": budget}, format="json")
        assert response.status_code == 400, (budget, response.content)
        assert message in response.json()["budget"][0], response.json()
    for raw in ('{"requirement": {"cost_usd": 1e22}}', '{"requirement": {"cost_usd": NaN}}',
                '{"requirement": {"tokens": 1' + "0" * 5000 + '}}'):
        response = client.post(url, f'{{"decision": "override_budget", "budget": {raw}}}', content_type="application/json")
        assert response.status_code == 400, (raw[:60], response.content[:200])
    assert pending(req, "budget_exhausted").pk == task.pk and fresh(req).budget_overrides == {}
    assert api_for(alice).get(f"/api/v1/requirements/{req.pk}/").status_code == 200

    within = {"requirement": {"cost_usd": "1E+5", "tokens": 10**10}, "roles": {"tech_lead": {"steps": None}}}
    assert client.post(url, {"decision": "override_budget", "budget": within}, format="json").status_code == 200
    assert fresh(req).budget_overrides["requirement"] == {"cost_usd": "100000", "tokens": 10**10}
    body = api_for(alice).get(f"/api/v1/requirements/{req.pk}/")
    assert body.status_code == 200
    assert body.json()["budget"]["standing"]["requirement"]["cost_usd"]["limit"] == "100000.000000"


def test_budget_options_on_another_kind_of_task_are_refused(alice, rita):
    req = submit(alice)
    task = pending(req, "stories_approval")
    client = api_for(rita)
    url = f"/api/v1/review-tasks/{task.pk}/decision/"
    assert client.post(url, {"decision": "override_budget", "budget": {}}, format="json").status_code == 400
    assert client.post(url, {"decision": "approve", "budget": {"requirement": {}}}, format="json").status_code == 400
    assert client.post(url, {"decision": "approve", "constraint": "x"}, format="json").status_code == 400


def test_deciding_a_budget_task_twice_is_a_conflict(alice, rita, acme_project):
    req = run_out_at_the_plan(alice, rita, acme_project)
    task = pending(req, "budget_exhausted")
    decide(task, rita, "reject", reason="stop")
    url = f"/api/v1/review-tasks/{task.pk}/decision/"
    response = api_for(rita).post(url, {"decision": "inject_constraint", "constraint": "x"}, format="json")
    assert response.status_code == 409
    # what a pending task would refuse with 400 (no reason, not an option) is a conflict too once it is decided
    for body in ({"decision": "reject"}, {"decision": "answer", "answer": "x"}):
        response = api_for(rita).post(url, body, format="json")
        assert response.status_code == 409 and "already resolved" in response.json()["detail"]


def test_the_requirement_detail_shows_spend_against_limits(alice, rita, acme_project, oscar):
    req = run_out_at_the_plan(alice, rita, acme_project)
    body = api_for(alice).get(f"/api/v1/requirements/{req.pk}/").json()
    assert body["budget"]["exhausted"] is True and body["budget"]["paused_from"] == "design_ready"
    assert body["budget"]["standing"]["role:tech_lead"]["steps"] == {"limit": 1, "spent": 1, "remaining": 0}
    assert body["budget"]["standing"]["requirement"]["steps"]["spent"] == 4
    assert api_for(oscar).get(f"/api/v1/requirements/{req.pk}/").status_code == 404


@pytest.mark.parametrize("policy,state,decision", [
    ("terminate", "cancelled", "reject"),
    ("override_budget", "escalated", "override_budget"),
    ("approve_partial", "cancelled", "reject"),  # no partial output of a plan step: the policy terminates
])
def test_autonomous_mode_decides_by_the_configured_policy_and_logs_it(alice, rita, acme_project, settings, policy,
                                                                      state, decision):
    settings.AITEAM_BUDGET_POLICY = policy
    budgeted(acme_project, {"roles": {"tech_lead": {"steps": 1}}})
    req = submit(alice)
    settings.AITEAM_AUTONOMOUS = True
    decide(pending(req, "stories_approval"), rita, "approve")
    req = fresh(req)
    first = req.review_tasks.filter(kind="budget_exhausted").order_by("created_at").first()
    assert (first.decision, first.decided_by, first.decided_by_policy, first.decided_via) == (
        decision, None, "autonomous", "policy")
    assert f"AITEAM_BUDGET_POLICY={policy}" in first.reason
    assert req.state == state if policy != "override_budget" else req.state in ("cancelled", "ready_to_deploy")
    if policy == "override_budget":  # one grace by policy (AITEAM_BUDGET_POLICY_MAX_OVERRIDES), then terminate
        later = req.review_tasks.filter(kind="budget_exhausted").exclude(pk=first.pk)
        assert [t.decision for t in later] == ["reject"] and req.state == "cancelled"


def test_approving_partial_code_stops_plan_tasks_still_in_flight_before_the_self_tests(alice, rita, acme_project):
    budgeted(acme_project, {"roles": {"senior_engineer": {"steps": 1}}})
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    req = fresh(req)
    assert (req.state, req.budget_paused_from) == ("escalated", "in_development")
    parked = Step.objects.get(requirement=req, key="engineer:T2")
    in_flight = Step.objects.create(requirement=req, key="engineer:T3", attempt=parked.attempt, state="running",
                                    fence=1, runs=1)  # as if another worker were still building it
    decide(pending(req, "budget_exhausted"), rita, "approve")
    in_flight.refresh_from_db()
    assert in_flight.state == "skipped" and in_flight.error.startswith("dropped: partial output approved")
    assert Step.objects.filter(requirement=req, key="self_test", attempt=parked.attempt).exists()
