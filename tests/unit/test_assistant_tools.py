"""The specialists' tools (ADR 36) on real rows: each gives the facts, within the asker's organization only."""
from __future__ import annotations

from decimal import Decimal

import pytest

from agents.llm.tool_use import ToolRefused
from agents.schemas import SourceFile
from lifecycle.failure_rules import Failure, Source, classify
from lifecycle.models import Conversation, LLMCall, Message, Project, Requirement, Step, ToolCall
from lifecycle.models.conversations import ToolKind
from lifecycle.services.artifacts import artifact_store
from lifecycle.services.assistant_tools import SPECIALIST_TOOLS, TOOLS, tools_for
from lifecycle.services.development import workspace_for
from lifecycle.services.failures import failure_route_record
from lifecycle.states import ArtifactKind
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db

QC_REPORT = {"passed": 11, "failed": 1, "errors": 0, "failing_tests": ["tests/test_list.py::test_sort_by_title"],
             "output_tail": "AssertionError: expected 'Dune' first", "lint": [],
             "gate": {"reasons": ["1 test failed"], "score": 72}}
CART = ("def total(prices):\n    return round(sum(prices), 2)\n\n\n"
        "class Cart:\n    def add(self, price):\n        self.items.append(price)\n")


def tools(specialist, org, asker=None, requirement=None):
    conversation = Conversation.objects.create(organization=org, requirement=requirement, title="q", started_by=asker)
    message = Message.objects.create(conversation=conversation, seq=2, author="assistant", state="answering")
    return {tool.spec.name: tool for tool in tools_for(specialist, asker=asker, conversation=conversation,
                                                        message=message)}


def run(specialist, org, name, asker=None, requirement=None, **arguments):
    return tools(specialist, org, asker, requirement)[name].run(arguments)


@pytest.fixture
def failed_run(acme_project):
    """A requirement whose self-tests failed twice: steps, their routes and the reports, written as the services do."""
    task = open_review(acme_project, kind="step_failed", title="Reading list")
    requirement = task.requirement
    Requirement.objects.filter(pk=requirement.pk).update(dev_attempts=2)
    for attempt in (1, 2):
        step = Step.objects.create(requirement=requirement, key="self_test", attempt=attempt, state="failed", runs=1,
                                   error=f"self-tests failed on attempt {attempt}: test_sort_by_title")
        failure = Failure(source=Source.SELF_TEST, step="self_test", tests_failed=True,
                          failing_tests=("tests/test_list.py::test_sort_by_title",), loop_exhausted=attempt == 2)
        failure_route_record(requirement=requirement, failure=failure, routing=classify(failure), step=step,
                             summary=f"self-tests of attempt {attempt}: 1 failed", action="fix attempt scheduled")
        artifact_store(requirement, kind=ArtifactKind.TEST_REPORT, name="self_test", step=step,
                       content={**QC_REPORT, "ok": False}, summary="11 passed, 1 failed, 0 errors",
                       metadata={"attempt": attempt, "ok": False, "passed": 11, "failed": 1, "errors": 0})
    Step.objects.create(requirement=requirement, key="engineer:T1", attempt=3, state="running", runs=1)
    LLMCall.objects.create(requirement=requirement, role="senior_engineer", provider="scripted", model="m",
                           system_sha256="0" * 64, system="s", tool_name="t", input_tokens=1200, output_tokens=300,
                           cost_usd=Decimal("0.0420"))
    return requirement


def test_the_status_reporter_sees_what_each_requirement_waits_on_and_its_spend(acme, failed_run):
    in_flight = run("status_reporter", acme, "requirements_in_flight")
    assert "'Reading list'" in in_flight and "a person to decide step_failed" in in_flight
    assert "step engineer:T1 (running)" in in_flight

    spend = run("status_reporter", acme, "requirement_spend", requirement_id=str(failed_run.pk))
    assert "requirement: steps 3 /" in spend and "tokens 1500 /" in spend  # two self-tests and the engineer's step
    assert "role:senior_engineer:" in spend and "cost_usd 0.042" in spend

    blockers = run("status_reporter", acme, "requirement_blockers", requirement=failed_run)
    assert "blocked by review task" in blockers and "step_failed round 1" in blockers
    assert "failed step self_test#2: self-tests failed on attempt 2" in blockers
    assert "under way: engineer:T1 (running)" in blockers

    digest = run("status_reporter", acme, "status_digest", requirement=failed_run)
    assert "waiting for a human (step_failed)" in digest and "engineer attempts 2" in digest
    assert "model spend of senior_engineer: 1 calls, 1200 input and 300 output tokens, $0.0420" in digest


def test_the_troubleshooter_reads_routes_with_their_traces_errors_reports_and_attempts(acme, failed_run):
    routes = run("troubleshooter", acme, "failure_routes", requirement=failed_run)
    newest, older = routes.split("\n\n")
    assert "self_test step self_test#2: self-tests of attempt 2: 1 failed" in newest
    assert "routed to human by rule loop_exhausted" in newest  # the attempts used up: a person is asked
    assert "trace: loop_exhausted matched → human: the engineer attempts or review rounds are used up" in newest
    assert "routed to engineer by rule failing_tests" in older and "trace: failing_tests matched → engineer" in older
    assert "not matched:" in older and '"failing_tests": ["tests/test_list.py::test_sort_by_title"]' in older

    errors = run("troubleshooter", acme, "step_errors", requirement=failed_run)
    assert errors.splitlines()[0].startswith("self_test#2 failed after 1 run(s)")

    reports = run("troubleshooter", acme, "test_reports", requirement=failed_run)
    assert "self-tests v2" in reports and "NOT ok; 11 passed, 1 failed, 0 errors" in reports
    assert "failing (1): tests/test_list.py::test_sort_by_title" in reports and "expected 'Dune' first" in reports

    history = run("troubleshooter", acme, "attempt_history", requirement=failed_run)
    assert history.splitlines()[1:] == ["self_test#1 failed (1 run(s)): self-tests failed on attempt 1: test_sort_by_title",
                                        "self_test#2 failed (1 run(s)): self-tests failed on attempt 2: test_sort_by_title",
                                        "engineer:T1#3 running (1 run(s))"]


@pytest.fixture
def deployment_task(acme_project):
    """A deployment approval pinned as quality._ask_for_deployment pins it, with the QC report behind it."""
    task = open_review(acme_project, kind="deployment_approval", title="Reading list", context={
        "quality_score": 91, "tests": {"passed": 12, "failed": 0, "errors": 0}, "gate": [],
        "diff_summary": ["A src/books.py (+40 -0)", "M src/app.py (+3 -1)", "A tests/test_books.py (+25 -0)"],
        "ci_config": "name: ci\non: push\n", "branch": "aiteam/1234abcd-reading-list"},
        reasoning="quality score 91: pass")
    artifact_store(task.requirement, kind=ArtifactKind.TEST_REPORT, name="qc", content={**QC_REPORT, "failed": 0,
                   "failing_tests": []}, summary="quality score 91: pass",
                   metadata={"ok": True, "score": 91, "passed": 12, "failed": 0, "errors": 0})
    return task


def test_the_review_assistant_explains_a_task_and_summarizes_its_change(acme, rita, deployment_task):
    explained = run("review_assistant", acme, "explain_review_task", rita, task_id=str(deployment_task.pk))
    assert "deployment_approval round 1 on 'Reading list'" in explained
    assert f"question: {deployment_task.question}" in explained and "options: approve, reject" in explained
    assert "SLA: due" in explained and "reasoning: quality score 91: pass" in explained
    assert "never decided by policy: it waits for a person" in explained and "decided by default" not in explained

    change = run("review_assistant", acme, "review_change_summary", rita, task_id=str(deployment_task.pk))
    assert "(branch aiteam/1234abcd-reading-list)" in change and "3 files changed, +68 -1 lines" in change
    assert "  M src/app.py (+3 -1)" in change and "quality score: 91" in change
    assert "quality gate (QC) v1" in change and "ok; 12 passed, 0 failed, 0 errors" in change


def test_the_feedback_draft_is_a_skeleton_from_the_tasks_facts(acme, rita, acme_project):
    task = open_review(acme_project, kind="escalation", title="Reading list", reasoning="test_sort_by_title",
                       context={"attempts": 3, "failing_tests": ["tests/test_list.py::test_sort_by_title"]})
    draft = run("review_assistant", acme, "draft_feedback", rita, task_id=str(task.pk), decision="request_changes")
    assert "Decision: request_changes" in draft and "Reason: <" in draft
    assert "- failing: tests/test_list.py::test_sort_by_title" in draft
    assert "- make tests/test_list.py::test_sort_by_title pass: <what it should do>" in draft
    assert ToolCall.objects.get(tool="draft_feedback").kind == ToolKind.SUGGEST
    assert Requirement.objects.get(pk=task.requirement_id).review_tasks.get().is_pending  # a draft decides nothing


def test_the_code_guide_searches_and_reads_the_requirements_workspace(acme, acme_project):
    requirement = open_review(acme_project, title="Cart").requirement
    workspace = workspace_for(requirement).ensure()
    workspace.write([SourceFile(path="src/shop/cart.py", content=CART)])
    head = workspace.commit("T1 (attempt 1)")
    Requirement.objects.filter(pk=requirement.pk).update(workspace_head=head)

    found = run("code_guide", acme, "code_search", requirement=requirement, query="cart total")
    assert f"the requirement's workspace at its latest attempt (commit {head[:10]}): 1 files, 3 definitions" in found
    assert "src/shop/cart.py:1-2 function total: def total(prices):" in found and "file: src/shop/cart.py" in found

    read = run("code_guide", acme, "code_read", requirement=requirement, path="src/shop/cart.py", symbol="Cart.add")
    assert "src/shop/cart.py in the requirement's workspace" in read and "--- from line 1 ---" in read
    assert "        self.items.append(price)" in read
    missing = run("code_guide", acme, "code_read", requirement=requirement, path="cart.py")
    assert "cart.py is not a file of" in missing and "['src/shop/cart.py']" in missing


def test_the_code_guide_says_when_there_is_no_code_yet(acme, acme_project):
    requirement = open_review(acme_project, title="New app").requirement
    said = run("code_guide", acme, "code_search", requirement=requirement, query="anything")
    assert "'New app' has no code yet: it is a new project's requirement" in said


def test_every_tool_refuses_another_organizations_ids_and_malformed_ones(acme, rita, oscar, failed_run):
    theirs = open_review(Project.objects.get(organization__slug="globex"), kind="deployment_approval", title="Globex")
    for specialist, names in SPECIALIST_TOOLS.items():
        offered = tools(specialist, acme, rita)
        for name in names:
            if name in ("requirements_in_flight", "review_tasks_waiting"):
                assert "Globex" not in offered[name].run({})
                continue
            for wanted in (theirs, "not-a-uuid"):
                arguments = _ids_of(TOOLS[name].arguments.model_fields, wanted)
                with pytest.raises(ToolRefused, match="not found: no .* in this organization"):
                    offered[name].run(arguments)
    assert not ToolCall.objects.filter(result__contains="Globex").exists()


def _ids_of(fields, wanted) -> dict:
    task_id, requirement_id = (str(wanted.pk), str(wanted.requirement_id)) if not isinstance(wanted, str) else (wanted,) * 2
    given = {"task_id": task_id, "requirement_id": requirement_id, "decision": "approve", "reason": "r", "query": "q",
             "path": "a.py"}
    return {name: value for name, value in given.items() if name in fields}


def test_a_system_conversation_is_offered_no_mutating_tool(acme, rita):
    for specialist, names in SPECIALIST_TOOLS.items():
        unasked = tools(specialist, acme, asker=None)
        assert all(TOOLS[name].kind != ToolKind.MUTATE for name in unasked)
        assert set(unasked) == {name for name in names if TOOLS[name].kind != ToolKind.MUTATE}
    assert {"decide_review_task", "cancel_requirement"} <= set(tools("review_assistant", acme, asker=rita))


def test_each_specialist_is_offered_exactly_its_tools(acme, rita):
    expected = {
        "status_reporter": {"requirements_in_flight", "requirement_status", "requirement_blockers", "requirement_spend",
                            "status_digest", "review_tasks_waiting"},
        "troubleshooter": {"requirement_status", "failure_routes", "step_errors", "test_reports", "attempt_history"},
        "review_assistant": {"review_tasks_waiting", "explain_review_task", "review_change_summary", "draft_feedback",
                             "requirement_status", "decide_review_task", "cancel_requirement"},
        "code_guide": {"requirement_status", "code_search", "code_read"},
    }
    assert {specialist: set(tools(specialist, acme, rita)) for specialist in SPECIALIST_TOOLS} == expected
    assert set(TOOLS) == set().union(*expected.values())
