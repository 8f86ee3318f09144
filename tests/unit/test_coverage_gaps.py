"""A coverage gap goes to its owner (issue 27, part 3; docs/adr/0026): a criterion QC's map leaves out is QC's
slip, repaired by QC before anything runs; a named test that did not run goes back to QC once; only a criterion
QC declares untestable (or one still uncovered after QC's rewrite) reaches a human acting for the analyst."""
import json

import pytest

from tests.answers import BA_STORIES, PO_CLEAR, answer
from tests.flows import decide, fresh, pending, submit, transitions

pytestmark = pytest.mark.django_db(transaction=True)
SPEC, DESIGN_OK, PLAN = answer("tech_architect"), answer("tech_lead", 0), answer("tech_lead", 1)
T1, T2_BUGGY, T3, FIX = (answer("senior_engineer", i) for i in range(4))
T2_OK = {"reasoning": "store with the ISBN check", "files": FIX["files"] + T2_BUGGY["files"][1:]}
CODE_OK, QC, DEVOPS = answer("tech_lead", 2), answer("qc_engineer"), answer("devops_engineer")
TO_REVIEW = (PO_CLEAR, BA_STORIES, SPEC, DESIGN_OK, PLAN, T1, T2_OK, T3)
GAP = "AC-3.2"  # "marking an unknown book as read fails clearly"; QC's file holds a test for it
SKIPPED_TEST = "\n\n@pytest.mark.skip(reason='no way to observe it')\ndef test_unknown_isbn_is_refused():\n    pass\n"


def queue(scripted, *answers) -> None:
    for item in answers:
        scripted.enqueue(item)


def approved(alice, rita):
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    return fresh(req)


def routes(req) -> list[tuple[str, str, str]]:
    return [(r.source, r.route, r.rule) for r in req.failure_routes.all()]


def left_out(qc: dict) -> dict:
    return {**qc, "coverage": {k: v for k, v in qc["coverage"].items() if k != GAP}}


def declared_untestable(qc: dict) -> dict:
    return {**left_out(qc), "untestable": {GAP: "the brief does not say what 'fails clearly' shows the user"}}


def skipped_test_named(qc: dict) -> dict:
    """QC's answer with a test for the gap that never runs (skipped), named for it in coverage."""
    first, *rest = qc["files"]
    content = first["content"] if "import pytest" in first["content"] else "import pytest\n" + first["content"]
    return {**qc, "files": [{**first, "content": content + SKIPPED_TEST}, *rest],
            "coverage": {**qc["coverage"], GAP: ["test_unknown_isbn_is_refused"]}}


def test_a_criterion_the_map_leaves_out_is_repaired_by_qc_and_no_analyst_is_asked(alice, rita, scripted):
    assert "def test_marking_an_unknown_book_fails_clearly(" in QC["files"][0]["content"]  # the test is there
    queue(scripted, *TO_REVIEW, CODE_OK, left_out(QC), QC, DEVOPS)
    req = approved(alice, rita)
    assert req.state == "ready_to_deploy", transitions(req)
    assert req.llm_calls.filter(role="qc_engineer").count() == 2
    (repair,) = scripted.requests[-2].messages[-1]["content"]
    assert repair["is_error"] and f"coverage leaves out criteria: ['{GAP}']" in repair["content"]
    assert routes(req) == [] and not req.review_tasks.filter(kind="escalation").exists()


def test_a_criterion_qc_declares_untestable_goes_to_a_human_for_the_analyst(alice, rita, scripted):
    queue(scripted, *TO_REVIEW, CODE_OK, declared_untestable(QC))
    req = approved(alice, rita)
    assert req.state == "test_pending"  # no edge back to the stories; the requirement waits at the gate
    assert routes(req) == [("quality_gate", "business_analyst", "acceptance_gap")]
    task = pending(req, "escalation")
    assert task.resume_target == "qc_tests" and task.context["routed_to"] == "business_analyst"
    (criterion,) = task.context["uncovered_criteria"]
    assert criterion["id"] == GAP and "does not say what 'fails clearly'" in criterion["untestable_because"]
    queue(scripted, QC, DEVOPS)
    decide(task, rita, "request_changes", feedback="AC-3.2: marking an unknown title prints an error and exits 1")
    req = fresh(req)
    assert req.state == "ready_to_deploy"
    assert "marking an unknown title prints an error" in json.dumps(scripted.requests[-2].messages)
    assert req.artifacts.filter(kind="acceptance_coverage").count() == 2


def test_a_named_test_that_did_not_run_goes_back_to_qc_with_the_finding(alice, rita, scripted):
    queue(scripted, *TO_REVIEW, CODE_OK, skipped_test_named(QC), QC, DEVOPS)
    req = approved(alice, rita)
    assert req.state == "ready_to_deploy", transitions(req)
    assert routes(req) == [] and not req.review_tasks.filter(kind="escalation").exists()
    (event,) = req.events.filter(name="AcceptanceTestsNotRun")
    assert event.payload == {"criteria": {GAP: ["test_unknown_isbn_is_refused"]}}
    rewrite = json.dumps(scripted.requests[-2].messages)
    assert "AC-3.2: test_unknown_isbn_is_refused did not run" in rewrite
    gates = [r.metadata["ok"] for r in req.artifacts.filter(kind="test_report", name="qc").order_by("created_at")]
    assert gates == [False, True]


def test_a_named_test_that_still_does_not_run_after_qcs_rewrite_goes_to_a_human(alice, rita, scripted):
    queue(scripted, *TO_REVIEW, CODE_OK, skipped_test_named(QC), skipped_test_named(QC))
    req = approved(alice, rita)
    assert req.state == "test_pending"
    assert routes(req) == [("quality_gate", "business_analyst", "acceptance_gap")]
    (criterion,) = pending(req, "escalation").context["uncovered_criteria"]
    assert criterion["tests_not_run"] == ["test_unknown_isbn_is_refused"] and not criterion["untestable_because"]
