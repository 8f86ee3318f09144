"""Which provider runs is configuration: Anthropic when a key is set, else replay."""
from __future__ import annotations

from django.conf import settings

from agents.llm.base import LLMConfigError, Provider
from agents.llm.client import LLM
from agents.llm.replay import ReplayProvider


def provider_from_settings() -> Provider:
    name = settings.AITEAM_LLM_PROVIDER
    if name == "anthropic":
        from agents.llm.anthropic_provider import AnthropicProvider

        timeouts = settings.STEP_TIMEOUTS
        return AnthropicProvider(api_key=settings.ANTHROPIC_API_KEY, timeout=timeouts.llm_timeout,
                                 max_retries=timeouts.llm_max_retries)
    if name == "replay":
        return ReplayProvider.from_file(settings.AITEAM_REPLAY_CASSETTE, latency_ms=settings.AITEAM_REPLAY_LATENCY_MS)
    raise LLMConfigError(f"AITEAM_LLM_PROVIDER={name!r}: use 'anthropic' (with ANTHROPIC_API_KEY) or 'replay'")


def llm_from_settings(provider: Provider, prompts: dict[str, str] | None = None) -> LLM:
    classes = settings.AITEAM_MODELS
    models = {role: classes[kind] for role, kind in settings.AITEAM_ROLE_MODELS.items()}
    return LLM(provider=provider, models=models, default_model=classes["strong"], prompts=prompts,
               max_tokens=settings.AITEAM_MAX_OUTPUT_TOKENS)
