"""Budget accounting and the check before each step: spend from LLMCall and Step rows, one query,
a spent budget parks the step and escalates the requirement from the state it was in."""
import json
from decimal import Decimal

import pytest

from lifecycle import budget_limits as bl
from lifecycle.models import LLMCall, Project, Requirement, Step
from lifecycle.services import budget_gate, budgets, leases
from lifecycle.services.assistant_status import requirement_spend
from tests.conftest import api_for, staff_client
from tests.factories import MembershipFactory, project_form_data
from tests.flows import transitions

pytestmark = pytest.mark.django_db


@pytest.fixture
def requirement(alice, acme_project):
    return Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b",
                                      title="Budgeted")


def in_state(req: Requirement, state: str) -> Requirement:
    Requirement.objects.filter(pk=req.pk).update(state=state)
    return Requirement.objects.get(pk=req.pk)


def with_budget(req: Requirement, budget: dict) -> None:
    req.project.settings = {"budgets": budget}
    req.project.save()


def call(req, role: str, tokens: int = 100, cost: str = "0.01") -> LLMCall:
    return LLMCall.objects.create(requirement=req, role=role, provider="scripted", model="claude-sonnet-5-5",
                                  input_tokens=tokens - 10, output_tokens=5, cache_read_tokens=3,
                                  cache_creation_tokens=2, cost_usd=Decimal(cost))


def ran(req, key: str, attempt: int = 1, state: str = "done") -> Step:
    return Step.objects.create(requirement=req, key=key, attempt=attempt, runs=1, state=state)


def lease_for(req, key: str, attempt: int = 1) -> leases.Lease:
    step = Step.objects.create(requirement=req, key=key, attempt=attempt)
    return leases.step_claim(step_id=step.pk, worker="test")


def test_spend_adds_up_tokens_cost_steps_and_sandbox_runs_per_role(requirement):
    call(requirement, "senior_engineer", 1000, "0.50")
    call(requirement, "senior_engineer", 500, "0.25")
    call(requirement, "tech_lead", 200, "0.02")
    for key in ("engineer:T1", "engineer:T2", "self_test", "tl_plan"):
        ran(requirement, key)
    Step.objects.create(requirement=requirement, key="engineer:T3", attempt=1)  # queued, never ran: not spent
    spend = budgets.spend_of(requirement)
    assert spend["requirement"] == {"steps": 4, "tokens": 1700, "sandbox_runs": 1, "cost_usd": Decimal("0.77")}
    assert spend["role:senior_engineer"] == {"steps": 2, "tokens": 1500, "sandbox_runs": 0, "cost_usd": Decimal("0.75")}
    assert spend["role:sandbox"]["sandbox_runs"] == 1 and spend["role:tech_lead"]["tokens"] == 200


def test_the_check_lets_a_step_within_budget_run_reading_the_requirement_and_its_spend(requirement, django_assert_num_queries):
    call(requirement, "product_owner", 1000)
    lease = lease_for(in_state(requirement, "received"), "po_clarify")
    with django_assert_num_queries(3):  # the requirement with its project, its model calls, its steps
        allowance = budget_gate.budget_admit_or_park(lease)
    assert allowance and allowance.constraints == ()
    assert Step.objects.get(pk=lease.step_id).state == "running"


def test_the_check_hands_over_the_injected_constraints(requirement):
    Requirement.objects.filter(pk=requirement.pk).update(injected_constraints=["stdlib only"])
    lease = lease_for(in_state(requirement, "received"), "po_clarify")
    assert budget_gate.budget_admit_or_park(lease).constraints == ("stdlib only",)


def test_spent_tokens_park_the_step_and_escalate_from_the_state_it_was_in(requirement):
    with_budget(requirement, {"requirement": {"tokens": 1000}})
    call(requirement, "business_analyst", 1200, "0.30")
    ran(requirement, "po_clarify")
    lease = lease_for(in_state(requirement, "clarified"), "ba_stories")
    assert not budget_gate.budget_admit_or_park(lease)
    req = Requirement.objects.get(pk=requirement.pk)
    assert (req.state, req.budget_exhausted, req.budget_paused_from) == ("escalated", True, "clarified")
    assert transitions(req) == [("clarified", "exhaust_budget", "escalated")]
    step = Step.objects.get(pk=lease.step_id)
    assert step.state == "skipped" and step.error.startswith("budget exhausted: requirement tokens 1200/1000")
    task = req.review_tasks.get(kind="budget_exhausted")
    assert task.options == ["override_budget", "inject_constraint", "reject"]  # no partial output of a BA step
    assert task.context["exhausted"] == [{"scope": "requirement", "dimension": "tokens", "limit": 1000, "spent": 1200}]
    assert task.context["budget"]["requirement"]["tokens"] == {"limit": 1000, "spent": 1200, "remaining": 0}
    assert task.context["budget"]["requirement"]["steps"] == {"limit": 150, "spent": 1, "remaining": 149}
    assert task.context["budget"]["requirement"]["cost_usd"]["spent"] == "0.300000"
    assert task.context["budget"]["role:business_analyst"]["tokens"] == {"limit": None, "spent": 1200, "remaining": None}
    assert task.context["suggested_override"] == {"requirement": {"tokens": 2000}, "roles": {}}
    assert "business analyst ran out of budget" in task.question


def test_a_role_limit_stops_only_that_roles_steps(requirement):
    with_budget(requirement, {"roles": {"senior_engineer": {"cost_usd": "1"}}})
    call(requirement, "senior_engineer", 100, "1.20")
    in_state(requirement, "in_development")
    assert budget_gate.budget_admit_or_park(lease_for(requirement, "self_test"))  # the sandbox does not spend dollars
    assert not budget_gate.budget_admit_or_park(lease_for(requirement, "engineer:T2"))
    task = requirement.review_tasks.get(kind="budget_exhausted")
    assert task.context["exhausted"][0] == {"scope": "role:senior_engineer", "dimension": "cost_usd",
                                            "limit": "1.000000", "spent": "1.200000"}
    assert "approve" in task.options  # finished plan tasks are a partial output


def test_the_step_limit_counts_the_steps_before_this_one(requirement):
    with_budget(requirement, {"requirement": {"sandbox_runs": 2}})
    in_state(requirement, "in_development")
    ran(requirement, "self_test", 1)
    assert budget_gate.budget_admit_or_park(lease_for(requirement, "self_test", 2))  # one run before: room for the second
    assert budget_gate.budget_admit_or_park(lease_for(requirement, "engineer_fix", 3))  # an LLM step uses no sandbox run
    assert not budget_gate.budget_admit_or_park(lease_for(requirement, "self_test", 3))


def test_steps_parked_while_the_requirement_waits_for_a_decision_open_no_second_task(requirement):
    with_budget(requirement, {"roles": {"senior_engineer": {"steps": 1}}})
    in_state(requirement, "in_development")
    ran(requirement, "engineer:T1")
    assert not budget_gate.budget_admit_or_park(lease_for(requirement, "engineer:T2"))
    assert not budget_gate.budget_admit_or_park(lease_for(requirement, "self_test"))  # within budget, but the run is paused
    assert requirement.review_tasks.filter(kind="budget_exhausted").count() == 1
    assert sorted(budgets.parked_steps(requirement).values_list("key", flat=True)) == ["engineer:T2", "self_test"]


def test_parked_steps_are_not_counted_as_spent(requirement):
    with_budget(requirement, {"requirement": {"steps": 1}})
    in_state(requirement, "received")
    ran(requirement, "po_clarify")
    assert not budget_gate.budget_admit_or_park(lease_for(requirement, "ba_stories"))
    assert budgets.spend_of(requirement)["requirement"]["steps"] == 1


def test_the_check_takes_the_project_budget_as_it_is_now_when_the_run_kept_no_settings(requirement):
    """The limits are remembered per JSON text of their inputs: a changed project budget is new text. A run's
    settings stored as JSON null count as none, as Requirement.outcome_settings has it."""
    from django.db.models import JSONField, Value

    Requirement.objects.filter(pk=requirement.pk).update(run_settings=Value(None, JSONField()))
    in_state(requirement, "in_development")
    ran(requirement, "engineer:T1")
    assert budget_gate.budget_admit_or_park(lease_for(requirement, "engineer:T2"))
    with_budget(requirement, {"roles": {"senior_engineer": {"steps": 2}}})
    assert not budget_gate.budget_admit_or_park(lease_for(requirement, "engineer:T3"))  # T1 and T2 ran: the limit is reached


def test_an_invalid_project_budget_is_ignored_not_fatal(requirement):
    with_budget(requirement, {"requirement": {"steps": "many"}})
    assert budget_gate.budget_admit_or_park(lease_for(in_state(requirement, "received"), "po_clarify"))


def test_the_report_shows_spent_limit_and_remaining_for_the_requirement_and_roles(requirement):
    with_budget(requirement, {"roles": {"qc_engineer": {"tokens": 5000}}})
    call(requirement, "qc_engineer", 1000)
    report = budgets.budget_report(requirement)
    assert report["standing"]["role:qc_engineer"]["tokens"] == {"limit": 5000, "spent": 1000, "remaining": 4000}
    assert report["standing"]["role:senior_engineer"]["steps"] == {"limit": 80, "spent": 0, "remaining": 80}
    assert (report["exhausted"], report["constraints"]) == (False, [])


# --- limits beyond their maximum, stored before the bounds (budget_limits.MAXIMUM) -------------------------------
HUGE = {"requirement": {"cost_usd": "1e22", "tokens": 10**40}, "roles": {"tech_lead": {"cost_usd": "0.0000001"}}}


def test_dollars_are_shown_to_the_millionth_and_a_value_too_large_for_that_is_shown_as_it_is():
    assert budgets._json(Decimal("1.2")) == "1.200000"
    assert budgets._json(Decimal("1e22")) == "1E+22"  # quantized, it would need 29 digits: InvalidOperation
    assert budgets._json(Decimal("NaN")) == "NaN" and budgets._json(7) == 7
    table = budgets.standing({"requirement": {"cost_usd": Decimal("1e22")}, "roles": {}},
                             {"requirement": {**budgets.zero_spend(), "cost_usd": Decimal("1e21")}})
    assert table["requirement"]["cost_usd"] == {"limit": "1E+22", "spent": "1000000000000000000000.000000",
                                                "remaining": "9000000000000000000000.000000"}


def test_a_huge_limit_stored_before_the_bounds_renders_in_the_api_the_admin_and_the_assistant(requirement, alice,
                                                                                              rita):
    Requirement.objects.filter(pk=requirement.pk).update(budget_overrides=HUGE)
    requirement = Requirement.objects.get(pk=requirement.pk)
    call(requirement, "tech_lead", 100, "0.50")
    report = budgets.budget_report(requirement)
    assert report["standing"]["requirement"]["cost_usd"]["limit"] == "1000000.000000"  # read as the maximum
    assert report["standing"]["requirement"]["tokens"] == {"limit": 10**10, "spent": 100, "remaining": 10**10 - 100}
    assert report["standing"]["role:tech_lead"]["cost_usd"] == {"limit": "0.000001", "spent": "0.500000",
                                                                "remaining": "0.000000"}
    body = api_for(alice).get(f"/api/v1/requirements/{requirement.pk}/")
    assert body.status_code == 200
    assert body.json()["budget"]["standing"]["requirement"]["cost_usd"]["limit"] == "1000000.000000"
    assert body.json()["budget"]["overrides"]["requirement"]["cost_usd"] == "1e22"  # what is stored, as it is
    page = staff_client(rita).get(f"/admin/lifecycle/requirement/{requirement.pk}/change/")
    assert page.status_code == 200 and "0.500000 / 1000000.000000 (999999.500000 left)" in page.content.decode()
    assert "cost_usd 0.500000 / 1000000.000000" in requirement_spend(requirement)


def test_the_gate_stops_a_step_and_escalates_when_another_limit_is_stored_beyond_its_maximum(requirement):
    """The project's layer too: a limit beyond the maximum is read as the maximum, the layer is not dropped (its
    token limit still holds, not the playbook's 5 million)."""
    with_budget(requirement, {"requirement": {"tokens": 1000, "cost_usd": "1e22"}})
    Requirement.objects.filter(pk=requirement.pk).update(budget_overrides={"roles": {"business_analyst": {
        "cost_usd": 10**40, "steps": 10**30}}})
    call(requirement, "business_analyst", 1200, "0.30")
    lease = lease_for(in_state(requirement, "clarified"), "ba_stories")
    assert not budget_gate.budget_admit_or_park(lease)
    req = Requirement.objects.get(pk=requirement.pk)
    assert (req.state, req.budget_exhausted) == ("escalated", True)
    task = req.review_tasks.get(kind="budget_exhausted")
    assert task.context["exhausted"] == [{"scope": "requirement", "dimension": "tokens", "limit": 1000, "spent": 1200}]
    assert task.context["budget"]["requirement"]["cost_usd"]["limit"] == "1000000.000000"
    assert task.context["budget"]["role:business_analyst"]["steps"]["limit"] == 100_000


def test_a_grace_and_a_suggestion_at_the_maximum_stay_within_it(requirement):
    with_budget(requirement, {"requirement": {"cost_usd": "1000000"}})
    call(requirement, "senior_engineer", 100, "999999.999999")
    call(requirement, "senior_engineer", 100, "2")
    lease = lease_for(in_state(requirement, "in_development"), "engineer:T1")
    assert not budget_gate.budget_admit_or_park(lease)
    task = requirement.review_tasks.get(kind="budget_exhausted")
    at_most = {"requirement": {"cost_usd": "1000000"}, "roles": {"senior_engineer": {"cost_usd": "1000000"}}}
    assert task.context["suggested_override"] == at_most  # not double the limit, nor spent + half: beyond the maximum
    grace = budget_gate.budget_grace(requirement, task)
    assert bl.as_json(grace) == at_most
    assert bl.problems(bl.as_json(grace)) == [] and bl.problems(task.context["suggested_override"]) == []


def test_the_autonomous_policy_grace_is_bounded_too_and_terminates_when_the_maximum_leaves_no_room(requirement,
                                                                                                  settings):
    from lifecycle.services.autonomous import budget_policy_decide

    settings.AITEAM_BUDGET_POLICY = "override_budget"
    with_budget(requirement, {"requirement": {"cost_usd": "1000000"}})
    call(requirement, "senior_engineer", 100, "999999.999999")
    call(requirement, "senior_engineer", 100, "2")
    assert not budget_gate.budget_admit_or_park(lease_for(in_state(requirement, "in_development"), "engineer:T1"))
    decided = budget_policy_decide(requirement.review_tasks.get(kind="budget_exhausted"))
    assert decided.decision == "reject" and "the new limits leave no room" in decided.reason
    assert Requirement.objects.get(pk=requirement.pk).budget_overrides == {}


def test_the_project_admin_refuses_a_limit_beyond_its_maximum_but_not_an_edit_beside_one_stored_before(acme_project):
    owner = MembershipFactory(organization=acme_project.organization, role="admin", user__username="olga").user
    client = staff_client(owner)
    page = f"/admin/lifecycle/project/{acme_project.pk}/change/"
    huge_tokens = '{"budgets": {"requirement": {"tokens": 10000000000000000000000000000000000000000}}}'
    refused = client.post(page, project_form_data(acme_project, settings=huge_tokens))
    assert refused.status_code == 200
    assert "budgets: requirement.tokens: at most 10000000000 tokens (null: unlimited), got 1.000E+40" in \
        refused.context["adminform"].form.errors["settings"]

    digits = '{"budgets": {"requirement": {"tokens": 1' + "0" * 5000 + "}}}"  # beyond Python's 4,300-digit limit
    unreadable = client.post(page, project_form_data(acme_project, settings=digits))
    assert unreadable.status_code == 200 and "Exceeds the limit" in str(unreadable.context["adminform"].form.errors)

    Project.objects.filter(pk=acme_project.pk).update(settings={"budgets": HUGE})  # before the bounds
    assert client.get(page).status_code == 200
    kept = json.dumps({"budgets": HUGE, "scope": {"max_lines": 50}})
    assert client.post(page, project_form_data(acme_project, settings=kept)).status_code == 302
    assert Project.objects.get(pk=acme_project.pk).settings == {"budgets": HUGE, "scope": {"max_lines": 50}}
