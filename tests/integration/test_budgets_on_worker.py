"""Budgets on PostgreSQL, Redis and a real worker: a budget exhausted mid-flow escalates the requirement
from the state it was in, and each of the four human options does what it says."""
import pytest
from django.conf import settings

from lifecycle.models import Requirement, Step
from tests.flows import decide, pending, submit
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
CONSTRAINT = "Keep every module under 200 lines"


@pytest.fixture
def budget_worker(start_worker):
    return start_worker("budgets", concurrency=2, AITEAM_WORKSPACE_ROOT=str(settings.AITEAM_WORKSPACE_ROOT))


def state_of(req) -> str:
    return Requirement.objects.get(pk=req.pk).state


def events(req) -> list[str]:
    return list(req.transitions.filter(subject="requirement").order_by("id").values_list("event", flat=True))


def paused(alice, rita, project, tech_lead_steps: int) -> Requirement:
    """Stories approved, then the tech lead's step budget runs out on the worker."""
    project.settings = {"budgets": {"roles": {"tech_lead": {"steps": tech_lead_steps}}}}
    project.save()
    req = submit(alice)
    wait_for(lambda: state_of(req) == "user_stories_created", what="stories", timeout=30)
    decide(pending(req, "stories_approval"), rita, "approve")
    wait_for(lambda: req.review_tasks.pending().filter(kind="budget_exhausted").exists(), what="the budget gate",
             timeout=60)
    return Requirement.objects.get(pk=req.pk)


def test_an_exhausted_budget_escalates_from_the_state_it_ran_out_in(budget_worker, alice, rita, acme_project):
    req = paused(alice, rita, acme_project, tech_lead_steps=1)
    assert (req.state, req.budget_exhausted, req.budget_paused_from) == ("escalated", True, "design_ready")
    assert events(req)[-2:] == ["approve_design", "exhaust_budget"]
    task = pending(req, "budget_exhausted")
    assert task.context["exhausted"] == [{"scope": "role:tech_lead", "dimension": "steps", "limit": 1, "spent": 1}]
    assert task.context["budget"]["role:tech_lead"]["steps"] == {"limit": 1, "spent": 1, "remaining": 0}
    assert task.context["budget"]["requirement"]["steps"]["spent"] == 4  # PO, BA, architect, design review
    plan = Step.objects.get(requirement=req, key="tl_plan")
    assert plan.state == "skipped" and plan.error.startswith("budget exhausted")
    assert not req.llm_calls.filter(step=plan).exists()  # stopped before the model was called


def test_override_runs_the_stopped_step_again_and_the_flow_goes_on(budget_worker, alice, rita, acme_project):
    req = paused(alice, rita, acme_project, tech_lead_steps=1)
    decide(pending(req, "budget_exhausted"), rita, "override_budget", budget={"roles": {"tech_lead": {"steps": 10}}})
    wait_for(lambda: state_of(req) == "ready_to_deploy", what="plan, code, review and QC", timeout=120)
    assert events(req)[3:7] == ["approve_design", "exhaust_budget", "resume_budget", "start_development"]
    assert Step.objects.get(requirement=req, key="tl_plan").state == "done"


def test_inject_constraint_puts_it_in_every_later_agent_context(budget_worker, alice, rita, acme_project):
    req = paused(alice, rita, acme_project, tech_lead_steps=1)
    decide(pending(req, "budget_exhausted"), rita, "inject_constraint", constraint=CONSTRAINT)
    # the grace (spent + half the limit: 2 tech lead steps) pays for the plan; the code review stops again
    wait_for(lambda: Requirement.objects.get(pk=req.pk).budget_paused_from == "in_review", what="the second gate",
             timeout=120)
    req = Requirement.objects.get(pk=req.pk)
    assert req.injected_constraints == [CONSTRAINT]
    later = req.llm_calls.filter(step__key__in=["tl_plan", "engineer:T1", "engineer:T2", "engineer:T3", "engineer_fix"])
    assert later.count() == 5
    assert all(CONSTRAINT in str(call.messages) for call in later)


def test_approve_partial_output_accepts_the_spec_and_moves_on(budget_worker, alice, rita, acme_project):
    req = paused(alice, rita, acme_project, tech_lead_steps=0)
    assert req.budget_paused_from == "user_stories_created"
    decide(pending(req, "budget_exhausted"), rita, "approve")
    wait_for(lambda: Requirement.objects.get(pk=req.pk).budget_paused_from == "in_review", what="development",
             timeout=120)
    req = Requirement.objects.get(pk=req.pk)
    assert req.transitions.get(event="approve_design").actor_user == rita
    assert req.artifacts.get(kind="technical_spec").approved
    assert events(req)[3:7] == ["exhaust_budget", "resume_budget", "approve_design", "start_development"]


def test_terminate_cancels_the_requirement(budget_worker, alice, rita, acme_project):
    req = paused(alice, rita, acme_project, tech_lead_steps=1)
    decide(pending(req, "budget_exhausted"), rita, "reject", reason="over budget")
    wait_for(lambda: state_of(req) == "cancelled", what="cancellation", timeout=10)
    assert Step.objects.get(requirement=req, key="tl_plan").state == "skipped"
    assert not Step.objects.filter(requirement=req, state__in=["queued", "running"]).exists()
