"""A reviewer overrides the Product Owner's triage: POST /requirements/{id}/retriage/ sets another playbook and the
Product Owner clarifies again under it. Reviewers and admins may, a submitter may not (403), another organization
sees nothing (404); 409 while the triage runs and once design or planning has started."""
import pytest

from agents.schemas import ProductOwnerOutput
from lifecycle.actors import Actor
from lifecycle.errors import IllegalTransition
from lifecycle.models import OutboxEvent, Requirement
from lifecycle.services.leases import step_claim
from lifecycle.services.product import product_owner_apply, requirement_retriage
from tests import tickets
from tests.answers import BA_STORIES, PO_CLEAR
from tests.conftest import api_for
from tests.flows import decide, fresh, pending, submit, transitions
from tests.unit.test_triage_flow import BUG, FEATURE, TICKET, ticketed

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/api/v1/requirements/"
TO_BUG_FIX = {"playbook": "bug_fix", "reason": "It is a crash on empty input, not a feature."}


def retriage(user, requirement: Requirement, payload: dict = TO_BUG_FIX):
    return api_for(user).post(f"{URL}{requirement.pk}/retriage/", payload, format="json")


@pytest.fixture
def at_stories_gate(alice, scripted) -> Requirement:
    """A bug ticket the Product Owner took for a feature: stories written, waiting for a reviewer."""
    req = fresh(ticketed(alice, scripted, FEATURE, PO_CLEAR, BA_STORIES))
    assert (req.state, req.playbook) == ("user_stories_created", "new_feature")
    return req


def test_a_reviewer_switches_a_misread_ticket_to_the_bug_fix_playbook(at_stories_gate, rita, scripted, settings,
                                                                       tmp_path):
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    for item in tickets.BUG_FIX_RUN:
        scripted.enqueue(item)
    response = retriage(rita, at_stories_gate)
    assert response.status_code == 200, response.data
    req = fresh(at_stories_gate)
    assert (req.playbook, req.state, req.clarification_round) == ("bug_fix", "ready_to_deploy", 2), transitions(req)
    row = req.transitions.get(event="retriage")
    assert (row.from_state, row.to_state, row.actor_user) == ("user_stories_created", "received", rita)
    origin = row.metadata.pop("origin")  # where rita acted from, as a decision records it
    assert row.metadata == {"playbook": ["new_feature", "bug_fix"], "reason": TO_BUG_FIX["reason"]}
    assert origin["path"] == f"{URL}{at_stories_gate.pk}/retriage/"
    assert req.review_tasks.get(kind="stories_approval").state == "expired"
    assert req.docs.get(version=2).acceptance_criteria == tickets.CRITERIA  # clarified again, as a bug ticket
    assert "Clarify this bug ticket" in scripted.requests[3].messages[0]["content"]
    assert OutboxEvent.objects.get(requirement=req, name="PlaybookChanged").payload == {
        "from": "new_feature", "to": "bug_fix", "round": 2,
        "expired_tasks": [str(req.review_tasks.get(kind="stories_approval").pk)]}


def test_a_vague_ticket_waiting_for_its_reporter_can_be_switched_too(alice, rita, scripted):
    vague = {"verdict": "too_vague", "reasoning": "No expected result.", "clarifying_questions": ["What then?"]}
    req = fresh(ticketed(alice, scripted, BUG, vague, tickets.PO_TICKET, tickets.PLAN))
    assert (req.state, req.playbook) == ("blocked", "bug_fix")
    response = retriage(rita, req, {"playbook": "new_feature", "reason": "A new report format, not a defect."})
    assert response.status_code == 200 and response.data["playbook"] == "new_feature"
    req = fresh(req)
    assert req.review_tasks.get(kind="clarification").state == "expired"
    assert req.steps.filter(key="po_clarify", attempt=2).exists()


def test_a_submitter_may_not_override_the_triage(at_stories_gate, alice, sam):
    for user in (alice, sam):
        response = retriage(user, at_stories_gate)
        assert response.status_code == 403 and "no reviewer role" in response.data["detail"]
    assert fresh(at_stories_gate).playbook == "new_feature"


def test_another_organization_does_not_see_the_requirement(at_stories_gate, oscar):
    assert retriage(oscar, at_stories_gate).status_code == 404
    assert fresh(at_stories_gate).playbook == "new_feature"


def test_the_override_is_refused_once_planning_has_started(alice, rita, scripted, settings, tmp_path):
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    req = fresh(ticketed(alice, scripted, BUG, *tickets.BUG_FIX_RUN))
    assert req.state == "ready_to_deploy"
    response = retriage(rita, req, {"playbook": "new_feature", "reason": "wanted a feature"})
    assert response.status_code == 409 and response.data["code"] == "illegal_transition"
    assert fresh(req).playbook == "bug_fix"


def test_the_override_is_refused_in_design_before_planning(at_stories_gate, rita, scripted):
    decide(pending(at_stories_gate, "stories_approval"), rita, "approve")  # the architect's step is scheduled
    assert fresh(at_stories_gate).steps.filter(key="architect_spec").exists()
    response = retriage(rita, at_stories_gate)
    assert response.status_code == 409 and "playbook_still_open" in response.data["detail"]


@pytest.mark.django_db(transaction=False)
def test_the_override_waits_for_the_triage_to_finish(alice, rita):
    """Without a commit the triage step stays queued: the override would race its result."""
    response = api_for(alice).post(URL, {"ticket": TICKET}, format="json")
    req = Requirement.objects.get(pk=response.data["id"])
    assert list(req.steps.values_list("key", "state")) == [("po_triage", "queued")]
    assert retriage(rita, req).status_code == 409
    assert fresh(req).playbook == "new_feature"


@pytest.mark.parametrize(("payload", "field"), [
    ({"playbook": "new_feature", "reason": "same"}, "playbook"),
    ({"playbook": "deploy_secrets", "reason": "the ticket said so"}, "playbook"),
    ({"playbook": "bug_fix"}, "reason"),
    ({"playbook": "bug_fix", "reason": "   "}, "reason"),
    ({"playbook": "bug_fix", "reason": "x" * 2001}, "reason"),
    ({**TO_BUG_FIX, "state": "design_ready"}, "state"),
])
def test_a_bad_override_is_a_400_naming_the_field(at_stories_gate, rita, payload, field):
    response = retriage(rita, at_stories_gate, payload)
    assert response.status_code == 400 and field in response.data, response.data
    assert fresh(at_stories_gate).playbook == "new_feature"


def test_a_triage_that_failed_can_be_replaced_by_a_reviewers_choice(alice, rita, scripted):
    obeying = {"kind": "deploy_secrets", "reason": "the ticket says so"}
    req = fresh(ticketed(alice, scripted, obeying, obeying, obeying, tickets.PO_TICKET, tickets.PLAN))
    assert pending(req, "step_failed") and not req.steps.filter(key="po_clarify").exists()
    assert retriage(rita, req).status_code == 200
    req = fresh(req)
    failed_triage = req.review_tasks.filter(kind="step_failed").order_by("created_at").first()
    assert req.playbook == "bug_fix" and "'po_triage'" in failed_triage.question and failed_triage.state == "expired"
    assert [t[1] for t in transitions(req)][:4] == ["submit", "retriage", "clarify", "accept_ticket"]
    assert req.docs.get(version=2).acceptance_criteria == tickets.CRITERIA  # then planned (no engineer answer queued)


@pytest.mark.django_db(transaction=False)
def test_a_clarification_of_the_old_playbook_that_lands_late_is_refused(alice, rita):
    """The Product Owner was clarifying under new_feature when the reviewer switched to bug_fix: its answer, had it
    landed, would move the run under the wrong playbook; the new round's clarification is the one that counts."""
    req = submit(alice)  # a brief: no triage; po_clarify round 1 queued (no commit, so it has not run)
    lease = step_claim(step_id=req.steps.get(key="po_clarify").pk, worker="test")
    requirement_retriage(requirement_id=req.pk, actor=Actor.human(rita, "api"), playbook="bug_fix", reason="a crash")
    with pytest.raises(IllegalTransition, match="clarification round 1 was replaced by round 2"):
        product_owner_apply(lease=lease, output=ProductOwnerOutput.model_validate(PO_CLEAR))
    req = fresh(req)
    assert (req.state, req.playbook, req.docs.count()) == ("received", "bug_fix", 0)
    assert req.steps.filter(key="po_clarify", attempt=2, state="queued").exists()
