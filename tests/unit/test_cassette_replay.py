"""The cassette replay provider answers only what it recorded: the sample cassette answers the sample brief's
run, and any other request is a permanent CassetteMissError that says how to run it instead."""
import json
from pathlib import Path

import pytest
from django.conf import settings

from agents.llm.base import LLMConfigError
from agents.llm.factory import llm_from_settings
from agents.llm.replay import CassetteMissError, ReplayProvider
from agents.roles import PRODUCT_OWNER, TECH_ARCHITECT
from agents.schemas import ArchitectContext, ProductOwnerContext
from agents.schemas.design import FunctionalRequirement
from lifecycle.failure_rules import Failure, Route, Source, classify, error_classes
from tests.answers import PO_CLEAR
from tests.flows import SAMPLE

SAMPLE_CASSETTE = Path(settings.BASE_DIR) / "agents/cassettes/sample.json"
WORD_COUNTER = "Count the words in a text file and print the total. Punctuation is not a word."
REQUIREMENT = FunctionalRequirement(id="FR-1", story="Add a book", statement="A reader adds a book.",
                                    acceptance=["the book is listed"])


def _sample() -> ReplayProvider:
    return ReplayProvider.from_file(SAMPLE_CASSETTE)


def _clarify(provider: ReplayProvider, brief: str):
    return PRODUCT_OWNER.run(ProductOwnerContext(title="t", brief=brief), llm_from_settings(provider))


def _miss(provider: ReplayProvider, brief: str) -> CassetteMissError:
    with pytest.raises(CassetteMissError) as caught:
        _clarify(provider, brief)
    return caught.value


def test_the_sample_cassette_answers_the_sample_brief_with_its_recorded_answer():
    answer = _clarify(_sample(), SAMPLE)
    assert (answer.verdict, answer.summary, answer.objectives) == ("clear", PO_CLEAR["summary"], PO_CLEAR["objectives"])


def test_another_brief_is_refused_at_its_first_call_with_how_to_run_it():
    message = str(_miss(_sample(), WORD_COUNTER))
    assert f"the cassette {SAMPLE_CASSETTE} has no answer recorded for this product_owner request" in message
    assert "set ANTHROPIC_API_KEY" in message and "point AITEAM_REPLAY_CASSETTE at a cassette recorded for it" in message
    assert "\n" not in message


def test_a_brief_that_only_contains_the_recorded_one_is_another_brief():
    _miss(_sample(), f"{SAMPLE}\nIt must also sync with e-readers.")
    _miss(_sample(), SAMPLE[:-1])


def test_a_cassette_miss_is_permanent_so_the_step_goes_to_an_operator_and_is_not_retried():
    miss = _miss(_sample(), WORD_COUNTER)
    assert isinstance(miss, LLMConfigError) and not miss.transient
    routing = classify(Failure(source=Source.STEP, step="po_clarify", error_classes=error_classes(miss), runs_left=2))
    assert routing.route == Route.OPERATOR


def test_a_later_role_is_answered_only_for_the_recorded_run_it_builds_on():
    llm = llm_from_settings(_sample())
    recorded = ArchitectContext(title="Reading list", summary=PO_CLEAR["summary"], requirements=[REQUIREMENT])
    assert TECH_ARCHITECT.run(recorded, llm).summary.startswith("A standard-library Python package `readinglist`")
    other = recorded.model_copy(update={"summary": "A command-line word counter for text files."})
    with pytest.raises(CassetteMissError, match="no answer recorded for this tech_architect request"):
        TECH_ARCHITECT.run(other, llm)


def test_a_cassette_recorded_for_a_brief_answers_that_brief_only():
    interaction = {"role": "product_owner", "recorded_for": {"brief": WORD_COUNTER},
                   "tool_input": {**PO_CLEAR, "summary": "A word counter."}, "usage": {"input_tokens": 5}}
    provider = ReplayProvider([interaction])
    assert _clarify(provider, WORD_COUNTER).summary == "A word counter."
    _miss(provider, SAMPLE)


@pytest.mark.parametrize("recorded_for", [None, {}, {"brief": ["a", "list"]}, "the brief"])
def test_an_interaction_without_what_it_was_recorded_for_is_refused_when_the_cassette_loads(recorded_for):
    interaction = {"role": "product_owner", "match": [], "tool_input": PO_CLEAR}
    if recorded_for is not None:
        interaction["recorded_for"] = recorded_for
    with pytest.raises(LLMConfigError, match="role 'product_owner' matching \\[\\] has recorded_for .*without them "
                                             "it would answer any brief"):
        ReplayProvider([interaction])


def test_an_unreadable_cassette_is_a_config_error_naming_the_setting(tmp_path):
    with pytest.raises(LLMConfigError, match="cannot read replay cassette .*point AITEAM_REPLAY_CASSETTE"):
        ReplayProvider.from_file(tmp_path / "missing.json")
    (tmp_path / "list.json").write_text(json.dumps({"interactions": {"role": "x"}}))
    with pytest.raises(LLMConfigError, match="its interactions are not a list"):
        ReplayProvider.from_file(tmp_path / "list.json")


def test_every_interaction_of_the_sample_cassette_says_what_it_was_recorded_for():
    interactions = json.loads(SAMPLE_CASSETTE.read_text())["interactions"]
    briefs = {i["recorded_for"]["brief"] for i in interactions if "brief" in i["recorded_for"]}
    assert SAMPLE in briefs and len(briefs) == 2  # the sample, and the vague brief of the clarification tests
    assert all(i["recorded_for"] for i in interactions)
