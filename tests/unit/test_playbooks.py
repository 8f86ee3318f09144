"""Playbooks on the embedded default: a bug fix goes from the clarified ticket straight to plan, code,
review, QC and deployment (no stories, no spec); a new feature keeps the whole flow; the choice is
made at submission and validated."""
import json

import pytest
from pydantic import ValidationError

from agents.schemas import BugTicketOutput, ProductOwnerOutput
from lifecycle import playbooks
from lifecycle.errors import DomainError
from lifecycle.models import Requirement
from lifecycle.playbooks import Playbook, UnknownPlaybook, playbook_named
from lifecycle.services.delivery import delivery_plan
from lifecycle.services.intake import requirement_submit
from tests import tickets
from tests.conftest import api_for, staff_client
from tests.flows import decide, fresh, pending, submit, transitions

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/api/v1/requirements/"
BUG_FIX_SEQUENCE = [
    ("", "submit", "received"),
    ("received", "clarify", "clarified"),
    ("clarified", "accept_ticket", "design_ready"),
    ("design_ready", "start_development", "in_development"),
    ("in_development", "submit_for_review", "in_review"),
    ("in_review", "pass_code_review", "test_pending"),
    ("test_pending", "pass_quality_gate", "ready_to_deploy"),
    ("ready_to_deploy", "deploy", "deployed"),
]


@pytest.fixture
def remotes(settings, tmp_path):
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"


def submit_ticket(user) -> Requirement:
    requirement = requirement_submit(user=user, brief=tickets.TICKET, title="count_words crash", playbook="bug_fix")
    return fresh(requirement)


def deployed_bug_fix(alice, rita, scripted) -> Requirement:
    for item in tickets.BUG_FIX_RUN:
        scripted.enqueue(item)
    req = submit_ticket(alice)
    assert req.state == "ready_to_deploy", transitions(req)
    decide(pending(req, "deployment_approval"), rita, "approve")
    return fresh(req)


def test_a_bug_fix_reaches_deployed_without_stories_or_spec(alice, rita, scripted, remotes):
    req = deployed_bug_fix(alice, rita, scripted)
    assert req.playbook == "bug_fix" and req.state == "deployed"
    assert transitions(req) == BUG_FIX_SEQUENCE
    assert not req.stories.exists() and req.story_round == 0 and req.design_round == 0
    assert not req.artifacts.filter(kind__in=["technical_spec", "adr"]).exists()
    assert list(req.llm_calls.order_by("created_at").values_list("role", flat=True)) == [
        "product_owner", "tech_lead", "senior_engineer", "tech_lead", "qc_engineer", "devops_engineer"]
    assert not req.steps.filter(key__in=["ba_stories", "architect_spec", "tl_design_review"]).exists()
    accepted = req.transitions.get(event="accept_ticket")
    assert (accepted.actor_role, accepted.guard) == ("product_owner", "playbook_skips_stories,ticket_ready")
    gate = req.artifacts.get(kind="test_report", name="qc")
    assert gate.metadata["ok"] and gate.metadata["passed"] == 5  # 2 regression tests + 3 acceptance tests


def test_a_bug_fix_pull_request_describes_the_ticket_not_stories(alice, rita, scripted, remotes):
    body = delivery_plan(deployed_bug_fix(alice, rita, scripted).pk).body
    assert "## Ticket" in body and f"- {tickets.CRITERIA[2]}" in body
    assert "## Stories" not in body and "## Spec" not in body


def test_the_agents_after_the_skip_work_from_the_ticket_and_the_plan(alice, rita, scripted, remotes):
    deployed_bug_fix(alice, rita, scripted)
    team = [r for r in scripted.requests if r.role != "supervisor"]  # the delivery's system conversation asks too
    po, plan, engineer, review, qc, devops = (r.messages[0]["content"] for r in team)
    systems = [r.system for r in team]
    assert "filed a bug ticket" in systems[0] and "planning the fix of a clarified bug ticket" in systems[1]
    assert po.startswith("Clarify this bug ticket") and tickets.TICKET[:40] in po
    assert all(json.dumps(criterion) in plan for criterion in tickets.CRITERIA)
    assert tickets.SIGNATURE in engineer and "count_words('') returns 0" in engineer
    assert "count_words('') returns 0" in review
    assert '"id": "AC-3"' in qc and tickets.SIGNATURE in qc and "tests/test_wordcount.py" not in qc
    assert "Python 3.11" in devops and tickets.PO_TICKET["summary"] in devops


def test_a_clear_ticket_without_expected_behaviour_goes_back_to_the_po_for_repair(alice, rita, scripted, remotes):
    scripted.enqueue(tickets.PO_TICKET_WITHOUT_CRITERIA)
    for item in tickets.BUG_FIX_RUN:
        scripted.enqueue(item)
    req = submit_ticket(alice)
    assert req.state == "ready_to_deploy"
    assert "acceptance criteria" in str(scripted.requests[1].messages)  # the repair request names what is missing
    assert req.docs.get().acceptance_criteria == tickets.CRITERIA


def test_a_vague_ticket_blocks_for_the_reporter_then_goes_to_planning(alice, rita, scripted):
    vague = {"verdict": "too_vague", "reasoning": "No expected result.", "clarifying_questions": ["What should it return?"]}
    scripted.enqueue(vague).enqueue(tickets.PO_TICKET).enqueue(tickets.PLAN)  # the engineer's step fails: no answer
    req = submit_ticket(alice)
    assert req.state == "blocked"
    decide(pending(req, "clarification"), rita, "answer", answer="0 for empty or blank text")
    req = fresh(req)
    assert [t[1] for t in transitions(req)][:6] == ["submit", "block", "answer", "clarify", "accept_ticket",
                                                    "start_development"]
    assert req.docs.get(version=2).acceptance_criteria == tickets.CRITERIA


def test_a_new_feature_still_writes_stories_first(alice):
    req = submit(alice)
    assert req.playbook == "new_feature" and req.state == "user_stories_created"
    assert [t[1] for t in transitions(req)] == ["submit", "clarify", "create_stories"]
    assert req.llm_calls.first().messages[0]["content"].startswith("Clarify this brief")


def test_the_api_takes_the_playbook_at_submission_and_shows_the_ticket(alice, scripted):
    for item in tickets.BUG_FIX_RUN:
        scripted.enqueue(item)
    response = api_for(alice).post(URL, {"brief": tickets.TICKET, "playbook": "bug_fix"}, format="json")
    assert response.status_code == 201 and response.data["playbook"] == "bug_fix"
    detail = api_for(alice).get(f"{URL}{response.data['id']}/").data
    assert detail["state"] == "ready_to_deploy" and detail["stories"] == []
    assert detail["requirement_doc"]["acceptance_criteria"] == tickets.CRITERIA


@pytest.mark.parametrize("value", ["hotfix", "", 3, ["bug_fix"], None])
def test_an_unknown_playbook_is_a_400_naming_the_field(alice, value):
    response = api_for(alice).post(URL, {"brief": "Fix the crash", "playbook": value}, format="json")
    assert response.status_code == 400 and "playbook" in response.data, response.data
    assert not Requirement.objects.exists()


def test_the_service_refuses_an_unknown_playbook_too(alice):
    with pytest.raises(DomainError) as refused:
        requirement_submit(user=alice, brief="Fix the crash", playbook="hotfix")
    assert refused.value.field == "playbook" and "bug_fix" in str(refused.value)
    assert not Requirement.objects.exists()


def test_the_admin_shows_the_playbook(alice, rita, scripted):
    scripted.enqueue(tickets.PO_TICKET)  # the plan step then fails for want of an answer: design_ready is enough
    req = submit_ticket(alice)
    assert req.state == "design_ready"
    page = staff_client(rita).get("/admin/lifecycle/requirement/?playbook__exact=bug_fix").content.decode()
    assert "count_words crash" in page and "Bug fix" in page
    assert "Bug fix" in staff_client(rita).get(f"/admin/lifecycle/requirement/{req.pk}/change/").content.decode()


# --- the playbook declarations ---------------------------------------------------------
def test_a_lookup_of_an_unknown_playbook_fails_loudly():
    with pytest.raises(UnknownPlaybook, match="use one of new_feature, bug_fix"):
        playbook_named("hotfix")
    assert playbook_named("bug_fix") is playbooks.BUG_FIX


def test_only_the_new_feature_playbook_writes_stories():
    assert playbooks.NEW_FEATURE.writes_stories and not playbooks.BUG_FIX.writes_stories
    assert playbooks.BUG_FIX.phases == ("clarify", "plan", "develop", "code_review", "quality_gate", "deploy")


@pytest.mark.parametrize("phases,problem", [
    (("clarify", "plan", "develop", "code_review", "deploy"), "'quality_gate' cannot be skipped"),
    (("clarify", "stories", "plan", "develop", "code_review", "quality_gate", "deploy"), "come together"),
    (("plan", "clarify", "develop", "code_review", "quality_gate", "deploy"), "in the order"),
    (("clarify", "triage", "plan", "develop", "code_review", "quality_gate", "deploy"), "unknown phase 'triage'"),
])
def test_a_playbook_the_fsm_cannot_run_is_refused_when_declared(phases, problem):
    with pytest.raises(ValueError, match=problem):
        Playbook("odd", "Odd", phases)


def test_a_clear_bug_ticket_must_state_its_acceptance_criteria():
    with pytest.raises(ValidationError, match="acceptance criteria"):
        BugTicketOutput(**tickets.PO_TICKET_WITHOUT_CRITERIA)
    assert ProductOwnerOutput(**tickets.PO_TICKET_WITHOUT_CRITERIA).verdict == "clear"
    assert BugTicketOutput(verdict="too_vague", reasoning="r", clarifying_questions=["What should happen?"])


def test_a_step_with_several_jobs_picks_the_agent_by_context_and_refuses_an_unknown_one():
    from agents.roles import CLARIFY_JOBS, PLAN_JOBS, PRODUCT_OWNER, TICKET_CLARIFIER
    from agents.schemas import BugTicketContext, ProductOwnerContext, Ticket

    assert (CLARIFY_JOBS.role, PLAN_JOBS.role) == ("product_owner", "tech_lead")
    assert CLARIFY_JOBS.agents[ProductOwnerContext] is PRODUCT_OWNER
    assert CLARIFY_JOBS.agents[BugTicketContext] is TICKET_CLARIFIER
    with pytest.raises(TypeError, match="no tech_lead job takes a Ticket"):
        PLAN_JOBS.run(Ticket(summary="s", acceptance_criteria=["c"]), llm=None)
