"""An agent's answer is checked against what it was asked: a plan's story numbers against the stories (a
ticket's criteria), QC's coverage keys against the criteria ids; a mismatch goes back to the model to repair."""
import pytest
from pydantic import ValidationError

from agents.llm.factory import llm_from_settings
from agents.llm.scripted import ScriptedProvider
from agents.roles import PLANNER
from agents.schemas import ImplementationPlanOutput, PlanContext, QCContext, QCOutput
from agents.schemas.quality import AcceptanceCriterion
from agents.schemas.tickets import Ticket, TicketPlanContext

CONTEXT = PlanContext(summary="s", components=[], interfaces=[], data_models=[], stories=["1. Add", "2. List"])


def plan(*refs: list[int]) -> dict:
    tasks = [{"key": f"T{i}", "title": f"task {i}", "story_refs": r, "files": [f"m{i}.py"], "definition_of_done": "d"}
             for i, r in enumerate(refs, start=1)]
    return {"reasoning": "r", "tasks": tasks}


def test_a_story_number_past_the_last_is_refused_naming_the_range():
    with pytest.raises(ValidationError, match=r"story_refs must be between 1 and 2: \{'T2': \[3\]\}"):
        ImplementationPlanOutput.model_validate(plan([1], [2, 3]), context=CONTEXT)
    assert ImplementationPlanOutput.model_validate(plan([1], [2]), context=CONTEXT).tasks[1].story_refs == [2]


def test_a_tickets_plan_numbers_its_acceptance_criteria():
    ticket = TicketPlanContext(ticket=Ticket(summary="crash", acceptance_criteria=["no crash"]))
    with pytest.raises(ValidationError, match="between 1 and 1"):
        ImplementationPlanOutput.model_validate(plan([0]), context=ticket)


def test_the_planner_is_asked_again_when_its_references_are_off():
    provider = ScriptedProvider().enqueue(plan([3])).enqueue(plan([2]))
    output = PLANNER.run(CONTEXT, llm_from_settings(provider))
    assert output.tasks[0].story_refs == [2] and len(provider.requests) == 2
    assert "story_refs must be between 1 and 2" in str(provider.requests[1].messages[-1])


def test_qc_coverage_keys_must_be_criteria_ids():
    context = QCContext(criteria=[AcceptanceCriterion(id="AC-1.1", story="s", criterion="c")], interfaces=[],
                        modules=[])
    answer = {"reasoning": "r", "files": [{"path": "tests/acceptance/test_a.py", "content": "def test_a(): pass\n"}]}
    with pytest.raises(ValidationError, match=r"coverage names criteria that do not exist: \['AC-1\.2'\]"):
        QCOutput.model_validate({**answer, "coverage": {"AC-1.1": ["test_a"], "AC-1.2": ["test_a"]}}, context=context)
    assert QCOutput.model_validate({**answer, "coverage": {"AC-1.1": ["test_a"]}}, context=context).coverage


def test_qc_may_only_name_tests_its_files_define():
    context = QCContext(criteria=[AcceptanceCriterion(id="AC-1.1", story="s", criterion="c")], interfaces=[],
                        modules=[])
    answer = {"reasoning": "r", "files": [{"path": "tests/acceptance/test_a.py", "content": "def test_a(): pass\n"}]}
    with pytest.raises(ValidationError, match=r"coverage names tests that no file defines: \['test_b'\]"):
        QCOutput.model_validate({**answer, "coverage": {"AC-1.1": ["test_b"]}}, context=context)
    for name in ("test_a", "tests/acceptance/test_a.py::test_a", "test_a[1]"):
        assert QCOutput.model_validate({**answer, "coverage": {"AC-1.1": [name]}}, context=context)
