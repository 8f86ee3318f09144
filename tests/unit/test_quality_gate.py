"""Which acceptance criteria a QC run leaves uncovered: the gate's judgement, pure."""
import pytest

from agents.quality import uncovered

CRITERIA = ["AC-1", "AC-2"]
COVERAGE = {"AC-1": ["test_adds"], "AC-2": ["TestList::test_lists"]}
RAN = ["tests/test_store.py::test_store", "tests/acceptance/test_a.py::test_adds",
       "tests/acceptance/test_a.py::TestList::test_lists"]


def test_a_criterion_is_covered_when_a_test_named_for_it_ran_from_the_acceptance_tests():
    assert uncovered(CRITERIA, COVERAGE, {"tests_run": RAN, "failing_tests": []}) == []


def test_a_named_test_that_did_not_run_covers_nothing():
    ran = RAN[:2]  # TestList::test_lists was skipped (or never collected)
    assert uncovered(CRITERIA, COVERAGE, {"tests_run": ran, "failing_tests": []}) == ["AC-2"]
    elsewhere = ["tests/test_lists.py::TestList::test_lists", *RAN[:2]]  # the engineer's test of that name
    assert uncovered(CRITERIA, COVERAGE, {"tests_run": elsewhere, "failing_tests": []}) == ["AC-2"]


@pytest.mark.parametrize("report", [
    {"tests_run": ["tests/test_store.py::test_store"], "failing_tests": ["tests/acceptance/test_a.py"]},
    {"tests_run": ["tests/test_store.py"], "failing_tests": ["tests/test_store.py"], "errors": 1},
    {"tests_run": [], "failing_tests": [], "errors": 1},
    {"failing_tests": []},
    {"tests_run": [f"tests/acceptance/test_a.py::test_{i}" for i in range(500)], "tests_run_total": 900,
     "failing_tests": []},
], ids=["an acceptance module failed to import", "an engineer's module failed to import (pytest stopped)",
        "nothing ran", "an older report", "the stored list was cut among the acceptance tests"])
def test_when_the_run_cannot_say_which_tests_ran_the_names_decide(report):
    """An ImportError in QC's module is the engineer's failure (failing tests, back to development), not a gap in
    the criteria for the business analyst."""
    assert uncovered(CRITERIA, COVERAGE, report) == []
    assert uncovered(CRITERIA, {"AC-1": ["test_adds"]}, report) == ["AC-2"]


def test_a_list_cut_after_the_acceptance_tests_still_decides_by_what_ran():
    report = {"tests_run": RAN[1:2] + ["tests/test_store.py::test_other"], "tests_run_total": 900, "failing_tests": []}
    assert uncovered(CRITERIA, COVERAGE, report) == ["AC-2"]


def test_qc_may_name_a_test_by_its_file_too():
    coverage = {"AC-1": ["test_a.py::test_adds"], "AC-2": ["tests/acceptance/test_a.py::TestList::test_lists"]}
    assert uncovered(CRITERIA, coverage, {"tests_run": RAN, "failing_tests": []}) == []


def test_parametrized_tests_cover_by_their_name_however_qc_writes_it():
    ran = ["tests/acceptance/test_a.py::test_adds[1-2]", "tests/acceptance/test_a.py::TestList::test_lists[empty]"]
    for coverage in ({"AC-1": ["test_adds"], "AC-2": ["TestList::test_lists"]},
                     {"AC-1": ["test_a.py::test_adds"], "AC-2": ["test_lists[empty]"]},
                     {"AC-1": ["test_adds[1-2]"], "AC-2": ["tests/acceptance/test_a.py::TestList::test_lists"]}):
        assert uncovered(CRITERIA, coverage, {"tests_run": ran, "failing_tests": []}) == [], coverage
