"""Every check an output schema makes on a model's answer sends a refused answer back to the model as a repair
request, through the real provider loop: a bad first answer, a good repaired one, which is the one used. A check
that crashes (a bug of ours) is no repair request. DevOps' CI workflow, refused by actionlint, is repaired and
the run deploys."""
from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from agents import roles
from agents.llm.factory import llm_from_settings
from agents.llm.scripted import ScriptedProvider
from agents.roles import Agent
from agents.schemas import (
    BugTicketContext,
    CodeReviewContext,
    DesignReviewContext,
    DevOpsContext,
    EngineerContext,
    FixContext,
    LocalizeContext,
    PlanContext,
    PlannedTask,
    ProductOwnerContext,
    QCContext,
    RepoEngineerContext,
    TechnicalSpecOutput,
    TicketPlanContext,
    TriageContext,
)
from agents.schemas.quality import AcceptanceCriterion
from agents.schemas.tickets import Ticket
from lifecycle.services.intake import requirement_submit
from tests import tickets
from tests.answers import PO_CLEAR, answer
from tests.flows import decide, fresh, pending, transitions

SPEC = TechnicalSpecOutput.model_validate(answer("tech_architect"))
DESIGN_OK, CODE_OK, ENGINEER_OK = answer("tech_lead", 0), answer("tech_lead", 2), answer("senior_engineer", 0)
QC_OK, DEVOPS_OK = answer("qc_engineer"), answer("devops_engineer")
WORKFLOW = DEVOPS_OK["ci_workflow"]
TEST_FILE = {"path": "tests/acceptance/test_a.py", "content": "def test_a():\n    assert True\n"}
NO_OP_RUNTEST = "import _pytest.python\n\n_pytest.python.Function.runtest = lambda self: None\n"

PO = ProductOwnerContext(brief="A reading list for the command line.")
TICKET = BugTicketContext(brief=tickets.TICKET)
TRIAGE = TriageContext(body=tickets.TICKET, source="github", key="#42")
TRIAGED_BUG = {"kind": "bug", "reason": "count_words crashes on empty input."}
DESIGN = DesignReviewContext(requirements=[], spec=SPEC, round=1)
PLAN = PlanContext(summary="s", components=[], interfaces=[], data_models=[], stories=["1. Add", "2. List"])
TICKET_PLAN = TicketPlanContext(ticket=Ticket(summary="crash", acceptance_criteria=tickets.CRITERIA))
TASK = PlannedTask(key="T1", title="the models", story_refs=[1], files=[f["path"] for f in ENGINEER_OK["files"]],
                   definition_of_done="d")
ENGINEER = EngineerContext(task=TASK, interfaces=[], acceptance=[],
                           planned_elsewhere=["readinglist/store.py", "tests/test_store.py"])
FIX = FixContext(attempt=2, files=[], failing_tests=["tests/test_store.py::test_add"])
REVIEW = CodeReviewContext(diff_summary=[], files=[], tests_passed=14, acceptance=[], round=1)
LOST = REVIEW.model_copy(update={"lost_tests": ["the tests run fell from 14 to 8", "tests/test_store.py::test_add"]})
QC = QCContext(criteria=[AcceptanceCriterion(id=key, story="s", criterion="c") for key in QC_OK["coverage"]],
               interfaces=[], modules=[])
DEVOPS = DevOpsContext(project="p", summary="s", tech_stack=["Python"], files=[], test_command="python -m pytest -q")

SHOP = {"shop/cart.py": "def total(prices):\n    return sum(prices)\n", "shop/discount.py": "def apply(t):\n    return t\n"}
LOCALIZE = LocalizeContext(ticket=Ticket(summary="crash", acceptance_criteria=["c"]), repository_map="shop/cart.py\n",
                           known_paths=frozenset(SHOP), known_symbols={"shop/cart.py": frozenset({"total"})})
LOCALIZED_OK = {"reasoning": "r", "files": [{"path": "shop/cart.py", "action": "change", "reason": "sums"}]}
EDITS_OK = {"reasoning": "r", "edits": [{"path": "shop/cart.py", "search": "    return sum(prices)\n",
                                         "replace": "    return sum(p or 0 for p in prices)\n"}]}


class ShopEdits(RepoEngineerContext):
    """A repository task's context whose files are in memory (the lifecycle's reads its workspace)."""

    def current_files(self, paths):
        return {p: SHOP[p].encode() for p in paths if p in SHOP}


SHOP_TASK = ShopEdits(task=PlannedTask(key="T1", title="totals", story_refs=[1], files=["shop/cart.py"],
                                       definition_of_done="d"), ticket=LOCALIZE.ticket, acceptance=[], files=[])


def plan(*tasks: dict) -> dict:
    """A plan whose tasks are T1, T2… with the given overrides."""
    base = {"title": "a task", "story_refs": [1], "files": ["m.py"], "depends_on": [], "definition_of_done": "d"}
    return {"reasoning": "r", "tasks": [{**base, "key": f"T{i}", "files": [f"m{i}.py"], **t}
                                        for i, t in enumerate(tasks, start=1)]}


def with_files(good: dict, *files: dict) -> dict:
    return {**good, "files": list(files)}


@dataclass(frozen=True)
class Case:
    validator: str  # the check, as its function's qualified name
    agent: Agent
    context: BaseModel
    bad: dict[str, Any]
    good: dict[str, Any]
    message: str  # what the validator says, which the repair request must carry

    @property
    def schema(self) -> str:
        return self.agent.output.__name__


CASES = {
    "triage_question_without_answer": Case(
        "TriageOutput._answer_only_for_a_question", roles.TRIAGER, TRIAGE, {"kind": "question", "reason": "asks"},
        TRIAGED_BUG, "a question needs its answer in `answer`"),
    "triage_bug_with_answer": Case(
        "TriageOutput._answer_only_for_a_question", roles.TRIAGER, TRIAGE, {**TRIAGED_BUG, "answer": "Upgrade."},
        TRIAGED_BUG, "only a question has an answer; a bug ticket leaves `answer` empty"),
    "po_clear_without_objectives": Case(
        "ProductOwnerOutput._consistent", roles.PRODUCT_OWNER, PO, {**PO_CLEAR, "objectives": []}, PO_CLEAR,
        "a clear brief needs a summary and at least one objective"),
    "po_vague_without_questions": Case(
        "ProductOwnerOutput._consistent", roles.PRODUCT_OWNER, PO,
        {"verdict": "too_vague", "reasoning": "vague"}, answer("product_owner", 1),
        "a too_vague verdict needs at least one clarifying question"),
    "ticket_clear_without_summary": Case(
        "ProductOwnerOutput._consistent", roles.TICKET_CLARIFIER, TICKET, {**tickets.PO_TICKET, "summary": ""},
        tickets.PO_TICKET, "a clear brief needs a summary and at least one objective"),
    "ticket_without_criteria": Case(
        "BugTicketOutput._expected_behaviour", roles.TICKET_CLARIFIER, TICKET, tickets.PO_TICKET_WITHOUT_CRITERIA,
        tickets.PO_TICKET, "a clear bug ticket needs acceptance criteria"),
    "design_revise_without_notes": Case(
        "ReviewVerdict._notes_when_revising", roles.DESIGN_REVIEWER, DESIGN,
        {"verdict": "revise", "reasoning": "gaps"}, DESIGN_OK, "a revise verdict needs at least one note"),
    "plan_unsafe_path": Case(
        "PlannedTask._safe_paths", roles.PLANNER, PLAN, plan({"files": ["../outside.py"]}), plan({}),
        "file paths must be relative, in normal form"),
    "plan_story_past_the_last": Case(
        "ImplementationPlanOutput._refs_exist", roles.PLANNER, PLAN, plan({"story_refs": [3]}), plan({}),
        "story_refs must be between 1 and 2"),
    "plan_duplicate_keys": Case(
        "ImplementationPlanOutput._a_dag", roles.PLANNER, PLAN, plan({}, {"key": "T1"}), plan({}, {}),
        "task keys must be unique"),
    "plan_depends_on_a_later_task": Case(
        "ImplementationPlanOutput._a_dag", roles.PLANNER, PLAN, plan({"depends_on": ["T2"]}, {}),
        plan({}, {"depends_on": ["T1"]}), "T1 depends on ['T2'], which are not earlier tasks"),
    "ticket_plan_unsafe_path": Case(
        "PlannedTask._safe_paths", roles.TICKET_PLANNER, TICKET_PLAN,
        {**tickets.PLAN, "tasks": [{**tickets.PLAN["tasks"][0], "files": ["/etc/wordcount.py"]}]}, tickets.PLAN,
        "file paths must be relative, in normal form"),
    "ticket_plan_criterion_past_the_last": Case(
        "ImplementationPlanOutput._refs_exist", roles.TICKET_PLANNER, TICKET_PLAN,
        {**tickets.PLAN, "tasks": [{**tickets.PLAN["tasks"][0], "story_refs": [1, 4]}]}, tickets.PLAN,
        "story_refs must be between 1 and 3"),
    "ticket_plan_unknown_dependency": Case(
        "ImplementationPlanOutput._a_dag", roles.TICKET_PLANNER, TICKET_PLAN,
        {**tickets.PLAN, "tasks": [{**tickets.PLAN["tasks"][0], "depends_on": ["T9"]}]}, tickets.PLAN,
        "T1 depends on ['T9'], which are not earlier tasks"),
    "engineer_unsafe_path": Case(
        "SourceFile._safe", roles.ENGINEER, ENGINEER,
        with_files(ENGINEER_OK, {"path": "readinglist/../../x.py", "content": ""}), ENGINEER_OK,
        "a path must be relative, in normal form"),
    "engineer_same_path_twice": Case(
        "EngineerOutput._own_files_only", roles.ENGINEER, ENGINEER,
        with_files(ENGINEER_OK, *ENGINEER_OK["files"][:1] * 2), ENGINEER_OK, "each path at most once"),
    "engineer_writes_acceptance_tests": Case(
        "EngineerOutput._own_files_only", roles.ENGINEER, ENGINEER,
        with_files(ENGINEER_OK, *ENGINEER_OK["files"], TEST_FILE), ENGINEER_OK,
        "these belong to QC or DevOps (or could change how tests run): ['tests/acceptance/test_a.py']"),
    "engineer_empties_another_tasks_tests": Case(
        "EngineerOutput._planned_files_only", roles.ENGINEER, ENGINEER,
        with_files(ENGINEER_OK, *ENGINEER_OK["files"], {"path": "tests/test_store.py", "content": ""}), ENGINEER_OK,
        "these files are not task T1's to write: ['tests/test_store.py']"),
    "engineer_writes_outside_its_folders": Case(
        "EngineerOutput._planned_files_only", roles.ENGINEER, ENGINEER,
        with_files(ENGINEER_OK, *ENGINEER_OK["files"], {"path": "setup.py", "content": ""}), ENGINEER_OK,
        "these files are not task T1's to write: ['setup.py']"),
    "fixer_writes_a_conftest": Case(
        "EngineerOutput._own_files_only", roles.FIXER, FIX,
        with_files(ENGINEER_OK, *ENGINEER_OK["files"], {"path": "tests/conftest.py", "content": ""}), ENGINEER_OK,
        "these belong to QC or DevOps (or could change how tests run): ['tests/conftest.py']"),
    "engineer_reaches_into_the_runner": Case(
        "EngineerOutput._no_reach_into_the_runner", roles.FIXER, FIX,
        with_files(ENGINEER_OK, *ENGINEER_OK["files"], {"path": "readinglist/speed.py", "content": NO_OP_RUNTEST}),
        ENGINEER_OK, "code may not reach into the test runner (the tests' report must come from the tests): "
        "readinglist/speed.py:1: imports _pytest.python"),
    "edits_change_nothing": Case(
        "EditsOutput._changes_what_it_may", roles.ENGINEER_EDITS, SHOP_TASK, {"reasoning": "nothing to do"}, EDITS_OK,
        "an answer must change something"),
    "edits_write_acceptance_tests": Case(
        "EditsOutput._changes_what_it_may", roles.FIXER_EDITS, SHOP_TASK, {**EDITS_OK, "files": [TEST_FILE]}, EDITS_OK,
        "these belong to QC or DevOps (or could change how tests run): ['tests/acceptance/test_a.py']"),
    "edits_outside_the_plan": Case(
        "EditsOutput._planned_files_only", roles.ENGINEER_EDITS, SHOP_TASK, {**EDITS_OK, "edits": [
            *EDITS_OK["edits"], {"path": "shop/discount.py", "search": "    return t\n", "replace": "    return 0\n"}]},
        EDITS_OK, "these files are not task T1's to write: ['shop/discount.py']"),
    "edits_that_do_not_apply": Case(
        "EditsOutput._applies", roles.ENGINEER_EDITS, SHOP_TASK, {**EDITS_OK, "edits": [
            {**EDITS_OK["edits"][0], "search": "    return sum(price)\n"}]}, EDITS_OK,
        "block 1 (shop/cart.py): the search text matches no place in the file"),
    "localize_nothing_to_change": Case(
        "LocalizationOutput._a_change", roles.LOCALIZER, LOCALIZE, {"reasoning": "r", "files": [
            {**LOCALIZED_OK["files"][0], "action": "read"}]}, LOCALIZED_OK, "name at least one file to change or create"),
    "localize_unknown_path": Case(
        "LocalizationOutput._in_the_repository", roles.LOCALIZER, LOCALIZE, {"reasoning": "r", "files": [
            {**LOCALIZED_OK["files"][0], "path": "shop/carts.py"}]}, LOCALIZED_OK,
        "shop/carts.py is not a file of the repository (did you mean shop/cart.py"),
    "code_review_changes_without_notes": Case(
        "CodeReviewVerdict._notes_when_changes", roles.CODE_REVIEWER, REVIEW,
        {"verdict": "request_changes", "reasoning": "not yet"}, CODE_OK,
        "a request_changes verdict needs at least one note or spec issue"),
    "code_review_approves_with_spec_issues": Case(
        "CodeReviewVerdict._notes_when_changes", roles.CODE_REVIEWER, REVIEW,
        {**CODE_OK, "spec_issues": ["the spec contradicts itself"]}, CODE_OK,
        "an approve verdict cannot report spec issues"),
    "code_review_approves_lost_tests_silently": Case(
        "CodeReviewVerdict._lost_tests_answered", roles.CODE_REVIEWER, LOST, CODE_OK,
        {"verdict": "request_changes", "reasoning": "tests are gone", "notes": ["restore tests/test_store.py"]},
        "these tests were there before and did not run now: ['the tests run fell from 14 to 8'"),
    "qc_unsafe_path": Case(
        "SourceFile._safe", roles.QC_ENGINEER, QC,
        with_files(QC_OK, *QC_OK["files"], {"path": "tests/acceptance/x.sh", "content": ""}), QC_OK,
        "a path must be relative, in normal form"),
    "qc_test_outside_acceptance": Case(
        "QCOutput._only_acceptance_tests", roles.QC_ENGINEER, QC,
        with_files(QC_OK, *QC_OK["files"], {**TEST_FILE, "path": "tests/test_a.py"}), QC_OK,
        "QC writes only under tests/acceptance/: ['tests/test_a.py']"),
    "qc_unknown_criterion": Case(
        "QCOutput._known_criteria", roles.QC_ENGINEER, QC,
        {**QC_OK, "coverage": {**QC_OK["coverage"], "AC-9.9": next(iter(QC_OK["coverage"].values()))}}, QC_OK,
        "coverage names criteria that do not exist: ['AC-9.9']"),
    "qc_untestable_unknown_criterion": Case(
        "QCOutput._known_criteria", roles.QC_ENGINEER, QC, {**QC_OK, "untestable": {"AC-9.9": "vague"}}, QC_OK,
        "untestable names criteria that do not exist: ['AC-9.9']"),
    "qc_leaves_a_criterion_out": Case(
        "QCOutput._every_criterion_answered", roles.QC_ENGINEER, QC,
        {**QC_OK, "coverage": {**QC_OK["coverage"], "AC-1.1": []}}, QC_OK,
        "coverage leaves out criteria: ['AC-1.1']; name the tests that check each, or put it in untestable"),
    "qc_names_a_missing_test": Case(
        "QCOutput._named_tests_exist", roles.QC_ENGINEER, QC,
        {**QC_OK, "coverage": {**QC_OK["coverage"], "AC-1.1": ["test_nobody_wrote"]}}, QC_OK,
        "coverage names tests that no file defines: ['test_nobody_wrote']"),
    "devops_actionlint_finding": Case(
        "DevOpsOutput._valid_workflow", roles.DEVOPS_ENGINEER, DEVOPS,
        {**DEVOPS_OK, "ci_workflow": WORKFLOW.replace("runs-on", "runs_on")}, DEVOPS_OK,
        'actionlint 6:3: "runs-on" section is missing in job "test"'),
    "devops_undefined_matrix": Case(
        "DevOpsOutput._valid_workflow", roles.DEVOPS_ENGINEER, DEVOPS,
        {**DEVOPS_OK, "ci_workflow": WORKFLOW.replace('"3.11"', "${{ matrix.python-version }}")}, DEVOPS_OK,
        'property "python-version" is not defined'),
    "devops_no_tests": Case(
        "DevOpsOutput._valid_workflow", roles.DEVOPS_ENGINEER, DEVOPS,
        {**DEVOPS_OK, "ci_workflow": WORKFLOW.replace("python -m pytest -q", "echo ok")}, DEVOPS_OK,
        "no `run:` step runs pytest"),
}


def carries(repair: str, message: str) -> bool:
    """Whether a repair request (the validation errors as JSON) carries a validator's message."""
    return json.dumps(message)[1:-1] in repair


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_refused_answer_is_repaired_and_the_repaired_one_used(case: Case):
    provider = ScriptedProvider().enqueue(case.bad).enqueue(case.good)
    output = case.agent.run(case.context, llm_from_settings(provider))
    assert output == case.agent.output.model_validate(case.good, context=case.context)
    assert len(provider.requests) == 2
    echoed, repair = provider.requests[1].messages[-2:]
    assert echoed["content"][0]["input"] == case.bad  # the refused answer, then why it was refused
    (result,) = repair["content"]
    assert result["type"] == "tool_result" and result["is_error"]
    assert carries(result["content"], case.message) and f"Call {provider.requests[1].tool.name} again" in result["content"]


def validators(schema: type[BaseModel]) -> set[str]:
    """Every field and model validator of `schema` and of the models its fields hold, by qualified name."""
    found, seen, todo = set(), set(), [schema]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        decorators = model.__pydantic_decorators__
        found |= {d.func.__qualname__ for d in (*decorators.model_validators.values(),
                                                 *decorators.field_validators.values())}
        todo += [t for field in model.model_fields.values() for t in _models_in(field.annotation)]
    return found


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def test_every_validator_of_every_roles_output_has_a_repair_case():
    agents = [a for a in vars(roles).values() if isinstance(a, Agent)]
    expected = {(a.output.__name__, v) for a in agents for v in validators(a.output)}
    covered = {(case.schema, case.validator) for case in CASES.values()}
    assert expected - covered == set()
    assert covered <= expected  # a case names a validator that exists


def test_a_validator_that_crashes_is_a_bug_not_a_repair_request(monkeypatch):
    def crash(text: str):
        raise TypeError("sequence item 0: expected str instance, Problem found")

    monkeypatch.setattr("agents.ci_config.check_workflow", crash)
    provider = ScriptedProvider().enqueue(DEVOPS_OK).enqueue(DEVOPS_OK)
    with pytest.raises(TypeError, match="Problem found"):
        roles.DEVOPS_ENGINEER.run(DEVOPS, llm_from_settings(provider))
    assert len(provider.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_a_ci_workflow_actionlint_refuses_is_repaired_and_the_run_deploys(alice, rita, scripted, settings, tmp_path):
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    refused = {**tickets.DEVOPS, "ci_workflow": WORKFLOW.replace("runs-on", "runs_on")}
    for item in (*tickets.BUG_FIX_RUN[:-1], refused, tickets.DEVOPS):
        scripted.enqueue(item)
    req = fresh(requirement_submit(user=alice, brief=tickets.TICKET, title="count_words crash", playbook="bug_fix"))
    assert req.state == "ready_to_deploy", transitions(req)
    assert req.llm_calls.filter(role="devops_engineer").count() == 2 and not req.failure_routes.exists()
    (repair,) = scripted.requests[-1].messages[-1]["content"]
    assert repair["is_error"] and carries(repair["content"], '"runs-on" section is missing in job "test"')
    task = pending(req, "deployment_approval")
    assert task.context["ci_config"] == tickets.DEVOPS["ci_workflow"]
    decide(task, rita, "approve")
    assert fresh(req).state == "deployed"
