"""Tasks cannot destroy each other's work unnoticed (issue 27, part 4; docs/adr/0026): an engineer task that
writes another task's file is sent back as a repair request, and tests that were there and are gone (a fix that
empties a test file) are flagged at the self-test and must be answered at code review."""
import json

import pytest

from agents.lost_tests import defined_tests, key_of, lost_tests
from agents.sandbox.expected import module_tests
from agents.schemas import SourceFile
from lifecycle.services.artifacts import content_json
from lifecycle.services.development import workspace_for
from tests.answers import BA_STORIES, PO_CLEAR, answer
from tests.flows import decide, fresh, pending, submit, transitions

SPEC, DESIGN_OK, PLAN = answer("tech_architect"), answer("tech_lead", 0), answer("tech_lead", 1)
T1, T2_BUGGY, T3, FIX = (answer("senior_engineer", i) for i in range(4))
T2_OK = {"reasoning": "store with the ISBN check", "files": FIX["files"] + T2_BUGGY["files"][1:]}
CODE_OK, QC, DEVOPS = answer("tech_lead", 2), answer("qc_engineer"), answer("devops_engineer")
DESIGNED = (PO_CLEAR, BA_STORIES, SPEC, DESIGN_OK, PLAN)
MODELS_TESTS = next(f for f in T1["files"] if f["path"] == "tests/test_models.py")
EMPTIED = {"path": "tests/test_models.py", "content": '"""Moved into tests/test_cli.py."""\n'}


def queue(scripted, *answers) -> None:
    for item in answers:
        scripted.enqueue(item)


def approved(alice, rita):
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    return fresh(req)


def self_tests(req) -> list[dict]:
    return [r.metadata for r in req.artifacts.filter(kind="test_report", name="self_test").order_by("created_at")]


def test_a_run_id_and_a_written_test_are_known_by_file_and_function():
    assert key_of("tests/test_a.py::TestA::test_x[1-2]") == "tests/test_a.py::test_x"
    files = [SourceFile(path="tests/test_a.py", content="class TestA:\n    def test_x(self): pass\n\n"
                        "def test_y(): pass\ndef helper(): pass\n"),
             SourceFile(path="tests/helpers.py", content="def test_not_collected(): pass\n")]
    assert defined_tests(files) == {"tests/test_a.py::test_x", "tests/test_a.py::test_y"}


def test_a_test_file_nested_too_deep_to_parse_defines_no_test_here_as_a_broken_one():
    deep = "def test_x():\n    assert " + "-" * 10_000 + "1\n"  # MemoryError: the parser's stack
    unparsable = 'def test_y(x=' + ' + '.join(['1'] * 900) + '):\n    pass\n'  # RecursionError: unparse
    decorated = '@fixture(' + ' + '.join(['1'] * 900) + ')\ndef test_z(): pass\n'
    assert defined_tests([SourceFile(path="tests/test_deep.py", content=deep)]) == set()
    assert module_tests("tests/test_deep.py", deep.encode()) == []
    assert module_tests("tests/test_z.py", decorated.encode()) == []
    assert module_tests("tests/test_y.py", unparsable.encode()) == ["tests/test_y.py::test_y"]


def test_a_missing_test_and_a_lower_count_are_lost_but_a_cut_list_only_counts():
    before = {"tests_run": ["tests/test_a.py::test_x", "tests/test_a.py::test_y"], "tests_run_total": 2}
    after = {"tests_run": ["tests/test_a.py::test_x[1]"], "tests_run_total": 1}
    known = {"tests/test_a.py::test_x", "tests/test_a.py::test_y"}
    assert lost_tests(known, after, before) == ["the tests run fell from 2 to 1", "tests/test_a.py::test_y"]
    cut = {"tests_run": ["tests/test_a.py::test_x"], "tests_run_total": 600}
    assert lost_tests(known, cut, before) == []
    assert lost_tests(known, {**after, "tests_run": [*after["tests_run"], "tests/test_a.py::test_y"],
                              "tests_run_total": 2}, before) == []


@pytest.mark.django_db(transaction=True)
def test_a_task_that_empties_an_earlier_tasks_tests_is_sent_back_and_the_tests_stay(alice, rita, scripted):
    t3_bad = {**T3, "files": [*T3["files"], EMPTIED]}
    queue(scripted, *DESIGNED, T1, T2_OK, t3_bad, T3, CODE_OK, QC, DEVOPS)
    req = approved(alice, rita)
    assert req.state == "ready_to_deploy", transitions(req)
    assert req.llm_calls.filter(role="senior_engineer").count() == 4  # T1, T2, T3 refused, T3 repaired
    repair = next(r for r in scripted.requests if "not task T3's to write" in json.dumps(r.messages[-1:]))
    assert "['tests/test_models.py']" in json.dumps(repair.messages[-1])
    assert (workspace_for(req).path / "tests/test_models.py").read_text() == MODELS_TESTS["content"]
    assert [m["lost_tests"] for m in self_tests(req)] == [[]]


@pytest.mark.django_db(transaction=True)
def test_tests_a_fix_empties_are_flagged_at_self_test_and_must_be_answered_at_review(alice, rita, scripted):
    fix_emptying = {**FIX, "files": [*FIX["files"], EMPTIED]}
    restore = {"verdict": "request_changes", "reasoning": "tests vanished", "notes": ["restore tests/test_models.py"]}
    fix_restoring = {"reasoning": "the model tests are back", "files": [MODELS_TESTS]}
    queue(scripted, *DESIGNED, T1, T2_BUGGY, T3, fix_emptying, CODE_OK, restore, fix_restoring, CODE_OK, QC, DEVOPS)
    req = approved(alice, rita)
    assert req.state == "ready_to_deploy", transitions(req)
    first, emptied, restored = self_tests(req)
    gone = sorted(defined_tests([SourceFile(**MODELS_TESTS)]))
    assert first["lost_tests"] == [] and restored["lost_tests"] == []
    total = first["passed"] + first["failed"] + first["errors"]
    assert emptied["ok"] and emptied["lost_tests"] == [f"the tests run fell from {total} to {emptied['passed']}",
                                                       *gone]
    (event,) = req.events.filter(name="TestsLost")
    assert event.payload == {"attempt": 2, "lost": emptied["lost_tests"]}
    reviews = [content_json(r) for r in req.artifacts.filter(kind="review", name="code_review").order_by("created_at")]
    assert [r["verdict"] for r in reviews] == ["request_changes", "approve"]  # the silent approval was refused
    assert req.llm_calls.filter(role="tech_lead", step__key="tl_code_review").count() == 3
    (repair,) = [r for r in scripted.requests if "were there before and did not run now" in json.dumps(r.messages[-1])]
    assert gone[0] in json.dumps(repair.messages[0])  # the reviewer was shown the lost tests, then refused
