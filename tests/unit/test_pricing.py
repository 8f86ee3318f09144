"""Cost accounting fails closed: every model is priced by its own family, and an unpriced one is never called."""
from decimal import Decimal

import pytest
from django.core.checks import run_checks
from pydantic import BaseModel

from agents.llm.base import LLMConfigError, Usage
from agents.llm.client import LLM
from agents.llm.pricing import cost_usd
from agents.llm.scripted import ScriptedProvider

MILLION_IN_AND_OUT = Usage(input_tokens=1_000_000, output_tokens=1_000_000)


@pytest.mark.parametrize("model,dollars", [
    ("claude-opus-4-5-20251101", "30"), ("claude-opus-4-1-20250805", "90"), ("claude-opus-4-20250514", "90"),
    ("claude-3-opus-20240229", "90"), ("claude-sonnet-4-5", "18"), ("claude-3-7-sonnet-20250219", "18"),
    ("claude-haiku-4-5", "6"), ("claude-3-5-haiku-20241022", "4.80"), ("claude-3-haiku-20240307", "1.50"),
    ("claude-sonnet-5-5", "18"), ("claude-opus-4-0", "90"), ("claude-opus-4-1", "90"), ("claude-opus-4-5", "30"),
])
def test_each_model_costs_what_its_own_generation_costs(model, dollars):
    assert cost_usd(model, MILLION_IN_AND_OUT) == Decimal(dollars)


def test_cache_tokens_are_priced_apart():
    usage = Usage(input_tokens=0, output_tokens=0, cache_read_tokens=1_000_000, cache_creation_tokens=1_000_000)
    assert cost_usd("claude-sonnet-4-5", usage) == Decimal("4.05")


@pytest.mark.parametrize("model", ["claude-opus-4-0", "claude-opus-4-20250514", "claude-opus-4-1",
                                   "claude-opus-4-1-20250805"])
def test_opus_4_and_4_1_cache_tokens_cost_their_own_generations_rates(model):
    usage = Usage(cache_read_tokens=1_000_000, cache_creation_tokens=1_000_000)
    assert cost_usd(model, usage) == Decimal("1.50") + Decimal("18.75")


def test_aiteam_prices_adds_a_model_and_overrides_a_family(settings):
    settings.AITEAM_PRICES = {"acme-llm": [2, 4, 0, 0], "claude-sonnet": ["1", "1", "0", "0"]}
    assert cost_usd("acme-llm-7", MILLION_IN_AND_OUT) == Decimal(6)
    assert cost_usd("claude-sonnet-4-5", MILLION_IN_AND_OUT) == Decimal(2)


class Answer(BaseModel):
    text: str


def test_an_unpriced_model_is_refused_before_it_is_called():
    provider = ScriptedProvider().enqueue({"text": "never asked"})
    llm = LLM(provider=provider, models={"tech_lead": "gpt-unknown"}, default_model="claude-sonnet-5-5")
    with pytest.raises(LLMConfigError, match="no price for model 'gpt-unknown'"):
        llm.generate(role="tech_lead", system="s", messages=[{"role": "user", "content": "x"}], schema=Answer)
    assert provider.requests == []


@pytest.mark.parametrize("prices,models,problem", [
    ({}, {"fast": "claude-haiku-5-5", "strong": "mystery-1"}, "AITEAM_MODELS['strong'] = 'mystery-1' has no price"),
    ({"mystery": [1, 2, 3]}, {"strong": "mystery-1"}, "AITEAM_PRICES['mystery']: expected four"),
    ({"mystery": [1, 2, "x", 4]}, {"strong": "mystery-1"}, "AITEAM_PRICES['mystery']: expected four"),
    (["not", "a", "map"], {"strong": "claude-sonnet-5-5"}, "AITEAM_PRICES must be a JSON object"),
])
def test_startup_refuses_unpriced_models_and_malformed_prices(settings, prices, models, problem):
    settings.AITEAM_PRICES, settings.AITEAM_MODELS = prices, models
    errors = [e for e in run_checks() if e.id == "aiteam.E003"]
    assert any(problem in e.msg for e in errors), errors


def test_the_configured_models_pass_the_check():
    assert not [e for e in run_checks() if e.id == "aiteam.E003"]
