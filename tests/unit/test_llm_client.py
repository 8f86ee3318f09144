"""What an agent's LLM asks of the provider: the role's model and the role's output limit."""
from pydantic import BaseModel

from agents.llm.factory import llm_from_settings
from agents.llm.scripted import ScriptedProvider


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
