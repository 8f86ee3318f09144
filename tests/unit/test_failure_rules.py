"""The failure classifier: each rule routes a constructed failure to the right role; every rule is traced."""
import pytest
from django.db import IntegrityError, OperationalError

from lifecycle.failure_rules import NO_RULE, RULES, Failure, Route, Source, classify, error_classes

FAILING = ("tests/test_store.py::test_a_second_book_with_the_same_isbn_is_refused",)


def failed_run(**facts) -> Failure:
    return Failure(**{"source": Source.SELF_TEST, "step": "self_test", "tests_failed": True, "failing_tests": FAILING,
                      **facts})


class SandboxTimedOut(Exception):
    pass


class GitError(Exception):
    pass


@pytest.mark.parametrize(("failure", "route", "rule"), [
    (Failure(Source.STEP, "po_clarify", ("LLMTransientError", "LLMError", "Exception"), runs_left=2),
     Route.RETRY, "infrastructure_retry"),
    (Failure(Source.STEP, "po_clarify", ("LLMTransientError", "LLMError", "Exception"), runs_left=0),
     Route.OPERATOR, "infrastructure_exhausted"),
    (Failure(Source.STEP, "self_test", error_classes(SandboxTimedOut()), runs_left=1), Route.RETRY, "infrastructure_retry"),
    (Failure(Source.STEP, "engineer", error_classes(GitError()), runs_left=0), Route.OPERATOR, "infrastructure_exhausted"),
    (Failure(Source.STEP, "engineer", error_classes(OperationalError("deadlock detected")), runs_left=1),
     Route.RETRY, "infrastructure_retry"),  # a transient database error: retried, not an operator's at once
    (Failure(Source.STEP, "engineer", error_classes(IntegrityError("duplicate key")), runs_left=1),
     Route.OPERATOR, "no_rule_matched"),  # a constraint the code broke: a bug, not the tools
    (failed_run(after_fix=True, previous_signature=failed_run().signature), Route.HUMAN, "repeated_after_fix"),
    (failed_run(loop_exhausted=True), Route.HUMAN, "loop_exhausted"),
    (Failure(Source.CODE_REVIEW, "tl_code_review", spec_issues=("the spec's add() and the AC disagree on ISBNs",)),
     Route.ARCHITECT, "spec_inconsistency"),
    (Failure(Source.QUALITY_GATE, "qc_run", uncovered_criteria=("AC-2.1",), gate_reasons=("criteria without a test",)),
     Route.BUSINESS_ANALYST, "acceptance_gap"),
    (failed_run(), Route.ENGINEER, "failing_tests"),
    (Failure(Source.CODE_REVIEW, "tl_code_review", review_notes=("store.py: name the temp file",)),
     Route.ENGINEER, "review_changes"),
    (Failure(Source.QUALITY_GATE, "qc_run", gate_reasons=("lint: 1 finding(s)",)), Route.ENGINEER, "gate_findings"),
    (Failure(Source.STEP, "po_clarify", ("LLMError", "Exception"), error="still invalid after 2 repairs"),
     Route.OPERATOR, "no_rule_matched"),
])
def test_each_rule_routes_its_failure_to_the_right_role(failure, route, rule):
    routing = classify(failure)
    assert (routing.route, routing.first) == (route, rule)


def test_two_matching_rules_are_both_logged_and_the_first_decides():
    routing = classify(failed_run(after_fix=True, previous_signature=failed_run().signature, loop_exhausted=True))
    assert routing.route == Route.HUMAN
    assert routing.matched == ("repeated_after_fix", "loop_exhausted", "failing_tests")
    assert [step["rule"] for step in routing.trace if step["matched"]] == list(routing.matched)


def test_the_trace_holds_every_rule_in_order_with_its_outcome():
    routing = classify(failed_run())
    assert [step["rule"] for step in routing.trace] == [rule.name for rule in RULES]
    assert {step["rule"]: step["matched"] for step in routing.trace}["failing_tests"] is True
    assert sum(step["matched"] for step in routing.trace) == 1
    assert all(step["because"] for step in routing.trace)


def test_infrastructure_outranks_the_work_and_a_gap_outranks_failing_tests():
    timeout_after_fix = Failure(Source.STEP, "self_test", ("SandboxTimedOut",), runs_left=1, loop_exhausted=True)
    assert classify(timeout_after_fix).matched == ("infrastructure_retry", "infrastructure_exhausted", "loop_exhausted")
    gate = Failure(Source.QUALITY_GATE, "qc_run", tests_failed=True, failing_tests=FAILING,
                   uncovered_criteria=("AC-1.2",), gate_reasons=("pass rate 90%",))
    routing = classify(gate)
    assert routing.route == Route.BUSINESS_ANALYST
    assert routing.matched == ("acceptance_gap", "failing_tests", "gate_findings")


def test_a_different_failure_after_a_fix_goes_back_to_the_engineer():
    other = failed_run(after_fix=True, previous_signature=failed_run(failing_tests=()).signature)
    assert other.signature != other.previous_signature
    assert classify(other).route == Route.ENGINEER


def test_the_same_failure_without_a_fix_in_between_is_not_a_repeat():
    assert classify(failed_run(previous_signature=failed_run().signature)).route == Route.ENGINEER


def test_signatures_ignore_order_and_prose_but_not_the_failing_tests():
    a = Failure(Source.SELF_TEST, tests_failed=True, failing_tests=("t::a", "t::b"), error="first wording")
    b = Failure(Source.QUALITY_GATE, tests_failed=True, failing_tests=("t::b", "t::a"), error="second wording")
    assert a.signature == b.signature and len(a.signature) == 16
    assert a.signature != Failure(Source.SELF_TEST, tests_failed=True, failing_tests=("t::a",)).signature
    assert Failure(Source.CODE_REVIEW, review_notes=("prose",)).signature == ""


def test_nothing_recognised_goes_to_an_operator_with_every_rule_traced_as_unmatched():
    routing = classify(Failure(Source.STEP, "deliver", ("IntegrityError", "Exception")))
    assert (routing.route, routing.first, routing.matched) == (Route.OPERATOR, NO_RULE.name, ())
    assert not any(step["matched"] for step in routing.trace)


def test_error_classes_name_the_whole_hierarchy_so_subclasses_match():
    assert error_classes(ConnectionRefusedError()) == ("ConnectionRefusedError", "ConnectionError", "OSError",
                                                       "Exception")
    assert classify(Failure(Source.STEP, "deliver", error_classes(ConnectionRefusedError()), runs_left=1)).route == \
        Route.RETRY
