"""What an agent's LLM asks of the provider: the role's model and the role's output limit."""
import pytest
from pydantic import BaseModel

from agents.llm.base import LLMInvalidOutputError, LLMOutputTruncated, LLMRequest, LLMResponse
from agents.llm.factory import llm_from_settings
from agents.llm.scripted import ScriptedProvider
from agents.llm.structured import generate


class Answer(BaseModel):
    text: str


def test_each_role_asks_for_its_own_output_limit(settings):
    settings.AITEAM_MAX_OUTPUT_TOKENS = {"default": 4096, "senior_engineer": 16000}
    provider = ScriptedProvider().enqueue({"text": "a"}).enqueue({"text": "b"})
    llm = llm_from_settings(provider)
    for role in ("senior_engineer", "tech_lead"):
        llm.generate(role=role, system="s", messages=[{"role": "user", "content": "x"}], schema=Answer)
    assert [(r.role, r.max_tokens) for r in provider.requests] == [("senior_engineer", 16000), ("tech_lead", 4096)]
    assert provider.requests[0].model == settings.AITEAM_MODELS["strong"]


def test_startup_refuses_an_output_limit_that_is_not_a_positive_whole_number(settings):
    from django.core.checks import run_checks

    settings.AITEAM_MAX_OUTPUT_TOKENS = {"default": 4096, "senior_engineer": "lots", "qc_engineer": 0}
    [error] = [e for e in run_checks() if e.id == "aiteam.E004"]
    assert "senior_engineer='lots'" in error.msg and "qc_engineer=0" in error.msg


class StoppedProvider(ScriptedProvider):
    """A scripted provider whose every answer stopped for `stop_reason`, with input that would not validate."""

    def __init__(self, stop_reason: str) -> None:
        super().__init__()
        self.stop_reason = stop_reason

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        return LLMResponse(tool_input={}, content=[{"type": "text", "text": "..."}], model=request.model,
                           stop_reason=self.stop_reason)


def _generate(provider: ScriptedProvider) -> Answer:
    return generate(provider, role="analyst", model="claude-x", system="s", messages=[{"role": "user", "content": "x"}],
                    schema=Answer)


def test_an_answer_stopped_by_a_full_context_window_fails_at_once_saying_to_shrink_the_context():
    provider = StoppedProvider("model_context_window_exceeded")
    with pytest.raises(LLMOutputTruncated, match="context filled the model's window.*shrink the context"):
        _generate(provider)
    assert len(provider.requests) == 1  # no repair turn: the same context would fill the window again


def test_a_refusal_fails_at_once_naming_the_refusal_without_a_repair_turn():
    provider = StoppedProvider("refusal")
    with pytest.raises(LLMInvalidOutputError, match="refused") as caught:
        _generate(provider)
    assert not isinstance(caught.value, LLMOutputTruncated)
    assert len(provider.requests) == 1
