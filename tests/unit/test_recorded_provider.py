"""The recorded-run provider: answers a step's calls by position, replays recorded errors, names misses."""
import pytest

from agents.llm.base import LLMError, LLMRequest, LLMTransientError, ToolSpec, Usage
from agents.llm.replay import RecordedCall, RecordedRunProvider, ReplayMissError

TOOL = ToolSpec(name="submit_plan", description="", input_schema={})


def _request(role: str = "tech_lead", tool: ToolSpec = TOOL) -> LLMRequest:
    return LLMRequest(role=role, model="m", system="s", messages=[{"role": "user", "content": "x"}], tool=tool)


def _answer(value: int) -> RecordedCall:
    block = {"type": "tool_use", "id": f"toolu_{value}", "name": TOOL.name, "input": {"n": value}}
    return RecordedCall(role="tech_lead", tool=TOOL.name, model="claude-x", content=[block], stop_reason="tool_use",
                        usage=Usage(input_tokens=10, output_tokens=value))


def test_calls_are_answered_in_recorded_order_with_recorded_blocks_model_and_usage():
    provider = RecordedRunProvider([_answer(1), _answer(2)], step="tl_plan#1")
    first, second = provider.complete(_request()), provider.complete(_request())
    assert (first.tool_input, second.tool_input) == ({"n": 1}, {"n": 2})
    assert second.content[0]["id"] == "toolu_2" and second.model == "claude-x" and second.usage.output_tokens == 2


def test_a_step_run_again_continues_after_the_calls_it_already_replayed():
    provider = RecordedRunProvider([_answer(1), _answer(2)], step="tl_plan#1", start=1)
    assert provider.complete(_request()).tool_input == {"n": 2}


def test_a_recorded_transient_error_replays_as_a_transient_error_and_a_permanent_one_as_permanent():
    transient = RecordedCall(role="tech_lead", tool=TOOL.name, model="m", error="LLMTransientError: overloaded (529)")
    permanent = RecordedCall(role="tech_lead", tool=TOOL.name, model="m", error="LLMError: bad request")
    provider = RecordedRunProvider([transient, permanent], step="tl_plan#1")
    with pytest.raises(LLMTransientError, match="overloaded"):
        provider.complete(_request())
    with pytest.raises(LLMError, match="bad request") as caught:
        provider.complete(_request())
    assert not caught.value.transient


def test_a_recorded_cassette_miss_replays_as_the_same_permanent_error():
    from agents.llm.replay import CassetteMissError

    recorded = RecordedCall(role="tech_lead", tool=TOOL.name, model="m",
                            error="CassetteMissError: replay: the cassette has no answer recorded for this request")
    with pytest.raises(CassetteMissError, match="replayed from the recording: replay: the cassette has no answer") \
            as caught:
        RecordedRunProvider([recorded], step="tl_plan#1").complete(_request())
    assert not caught.value.transient


def test_a_call_beyond_the_recording_fails_naming_the_step_and_the_call():
    provider = RecordedRunProvider([_answer(1)], step="tl_plan#1")
    provider.complete(_request())
    with pytest.raises(ReplayMissError, match=r"step tl_plan#1 asks for model call #2 \(tech_lead, submit_plan\) but "
                                              r"the source run recorded 1 call\(s\)"):
        provider.complete(_request())


def test_a_call_for_another_role_or_tool_than_recorded_is_a_miss():
    provider = RecordedRunProvider([_answer(1)], step="tl_plan#1")
    with pytest.raises(ReplayMissError, match="asks qc_engineer/submit_plan, but the source run recorded "
                                              "tech_lead/submit_plan"):
        provider.complete(_request(role="qc_engineer"))


def test_a_call_the_time_limit_cut_short_is_recorded_and_replays_as_the_same_interruption():
    from celery.exceptions import SoftTimeLimitExceeded

    from agents.llm.replay import RecordingProvider

    class CutShort:
        name = "anthropic"

        def complete(self, request):
            raise SoftTimeLimitExceeded()

    records = []
    with pytest.raises(SoftTimeLimitExceeded):
        RecordingProvider(CutShort(), records.append).complete(_request())
    [record] = records
    assert record.response is None and record.error.startswith("SoftTimeLimitExceeded: the worker's time limit")

    recorded = RecordedCall(role="tech_lead", tool=TOOL.name, model="m", error=record.error)
    replay = RecordedRunProvider([recorded, _answer(2)], step="tl_plan#1")
    with pytest.raises(SoftTimeLimitExceeded):  # infrastructure, retried, as in the source run
        replay.complete(_request())
    assert replay.complete(_request()).tool_input == {"n": 2}


def test_a_sink_that_fails_does_not_swallow_the_time_limit():
    from celery.exceptions import SoftTimeLimitExceeded

    from agents.llm.replay import RecordingProvider

    class CutShort:
        name = "anthropic"

        def complete(self, request):
            raise SoftTimeLimitExceeded()

    def broken_sink(record):
        raise RuntimeError("database gone")

    with pytest.raises(SoftTimeLimitExceeded):
        RecordingProvider(CutShort(), broken_sink).complete(_request())
