"""A step that raised is routed by what happened: the model's output stayed invalid after the bounded repairs (a
person, shown the last validation errors), or our own code failed (an internal error: a bug, named by its
exception type). Both are on record as FailureRoute rows and said in the step_failed task."""
from __future__ import annotations

import pytest

from agents import ci_config
from agents.ci_config import LintUnavailable
from agents.llm.base import LLMError, LLMInvalidOutputError, LLMOutputStillInvalid, LLMOutputTruncated
from lifecycle.failure_rules import Failure, Route, Source, classify, error_classes
from lifecycle.services.intake import requirement_submit
from tests import tickets
from tests.flows import decide, fresh, pending, submit

STILL_INVALID = LLMOutputStillInvalid("po: still invalid", repairs=2, errors=({"loc": "", "msg": "no summary"},))


@pytest.mark.parametrize(("exc", "route", "rule"), [
    (STILL_INVALID, Route.HUMAN, "invalid_model_output"),
    (TypeError("sequence item 0: expected str instance, Problem found"), Route.OPERATOR, "internal_error"),
    (KeyError("devops"), Route.OPERATOR, "internal_error"),  # a LookupError, by its bases
    (AttributeError("'NoneType' object has no attribute 'id'"), Route.OPERATOR, "internal_error"),
    (LintUnavailable("actionlint timed out"), Route.OPERATOR, "infrastructure_exhausted"),  # the tools, not a bug
    (LLMOutputTruncated("cut off at max_tokens"), Route.OPERATOR, "no_rule_matched"),  # no repair was tried
    (LLMInvalidOutputError("the model refused"), Route.OPERATOR, "no_rule_matched"),
    (LLMError("no answer queued"), Route.OPERATOR, "no_rule_matched"),
])
def test_invalid_output_and_internal_errors_get_rules_of_their_own(exc, route, rule):
    routing = classify(Failure(Source.STEP, "devops", error_classes(exc)))
    assert (routing.route, routing.first) == (route, rule)


def test_a_crash_is_neither_infrastructure_nor_invalid_output():
    failure = Failure(Source.STEP, "devops", error_classes(TypeError("boom")))
    assert (failure.internal, failure.infrastructure, failure.invalid_output) == (True, False, False)
    assert classify(failure).matched == ("internal_error",)


@pytest.mark.django_db(transaction=True)
def test_output_that_stays_invalid_is_routed_as_invalid_model_output_and_the_task_shows_its_errors(alice, scripted):
    for _ in range(3):
        scripted.enqueue({"verdict": "clear", "reasoning": "ok"})  # no summary, no objectives
    req = submit(alice)
    route = req.failure_routes.get()
    assert (route.source, route.route, route.rule, route.matched) == ("step", "human", "invalid_model_output",
                                                                      ["invalid_model_output"])
    assert route.facts["repairs"] == 2 and route.facts["invalid_output"] and not route.facts["internal"]
    assert route.facts["validation_errors"] == ["Value error, a clear brief needs a summary and at least one objective"]
    assert route.action == "step failed: a step_failed review task asks a person to retry or cancel"
    task = pending(req, "step_failed")
    assert task.context["rule"] == "invalid_model_output"
    assert task.question.startswith("Step 'po_clarify' (attempt 1): invalid model output. The model's answer "
                                    "stayed invalid after 2 repair(s); the last validation errors: ")
    assert "a clear brief needs a summary and at least one objective" in task.question
    assert "still invalid after 2 repairs" in task.reasoning


@pytest.mark.django_db(transaction=True)
def test_a_crashing_validator_is_routed_as_an_internal_error_naming_the_exception(alice, rita, scripted, monkeypatch,
                                                                                 settings, tmp_path):
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    real_check = ci_config.check_workflow

    def crash(text: str):
        raise TypeError("sequence item 0: expected str instance, Problem found")

    monkeypatch.setattr("agents.ci_config.check_workflow", crash)  # DevOps' output validator calls it
    for item in tickets.BUG_FIX_RUN:
        scripted.enqueue(item)
    req = fresh(requirement_submit(user=alice, brief=tickets.TICKET, title="count_words crash", playbook="bug_fix"))
    assert req.state == "test_pending"
    assert req.llm_calls.filter(role="devops_engineer").count() == 1  # a bug of ours is no repair request
    route = req.failure_routes.get()
    assert (route.route, route.rule, route.step.key) == ("operator", "internal_error", "devops")
    assert route.facts["error_classes"][0] == "TypeError" and route.facts["internal"]
    task = pending(req, "step_failed")
    assert task.context["rule"] == "internal_error"
    assert "internal error" in task.question and "A bug in aiteam's own code raised TypeError" in task.question
    assert "Problem found" in task.reasoning
    monkeypatch.setattr("agents.ci_config.check_workflow", real_check)  # the bug fixed: a rerun goes on
    scripted.enqueue(tickets.DEVOPS)
    decide(task, rita, "approve")
    decide(pending(fresh(req), "deployment_approval"), rita, "approve")
    assert fresh(req).state == "deployed"
