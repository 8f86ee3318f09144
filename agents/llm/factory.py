"""Which provider runs is configuration: Anthropic when a key is set, else replay."""
from __future__ import annotations

import os
import threading
from functools import lru_cache

from django.conf import settings

from agents.llm.base import LLMConfigError, Provider
from agents.llm.client import LLM
from agents.llm.replay import ReplayProvider

_one_at_a_time = threading.Lock()  # lru_cache alone lets threads that miss together each build one


def provider_from_settings() -> Provider:
    name = settings.AITEAM_LLM_PROVIDER
    if name == "anthropic":
        timeouts = settings.STEP_TIMEOUTS
        with _one_at_a_time:
            return _anthropic(settings.ANTHROPIC_API_KEY, timeouts.llm_timeout, timeouts.llm_max_retries,
                              os.environ.get("ANTHROPIC_BASE_URL"), os.getpid())
    if name == "replay":
        return ReplayProvider.from_file(settings.AITEAM_REPLAY_CASSETTE, latency_ms=settings.AITEAM_REPLAY_LATENCY_MS)
    raise LLMConfigError(f"AITEAM_LLM_PROVIDER={name!r}: use 'anthropic' (with ANTHROPIC_API_KEY) or 'replay'")


@lru_cache(maxsize=1)
def _anthropic(api_key: str, timeout: float, max_retries: int, base_url: str | None, pid: int) -> Provider:
    """One provider per process and configuration, shared by its steps and threads: its HTTP client keeps the
    connection to the API alive from one call to the next, where a new client loads the CA bundle and pays a TCP
    and TLS handshake every time. Only the latest configuration is kept: a changed setting replaces it. `base_url`
    is what the SDK would read itself; `pid` is only part of the key: a process forked after making one gets its
    own, not a share of its parent's sockets."""
    from agents.llm.anthropic_provider import AnthropicProvider

    return AnthropicProvider(api_key=api_key, timeout=timeout, max_retries=max_retries, base_url=base_url)


def llm_from_settings(provider: Provider, prompts: dict[str, str] | None = None) -> LLM:
    classes = settings.AITEAM_MODELS
    models = {role: classes[kind] for role, kind in settings.AITEAM_ROLE_MODELS.items()}
    return LLM(provider=provider, models=models, default_model=classes["strong"], prompts=prompts,
               max_tokens=settings.AITEAM_MAX_OUTPUT_TOKENS)
