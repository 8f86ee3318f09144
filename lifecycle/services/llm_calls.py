"""Persist a model call as an LLMCall row (autocommit: never inside a step's transaction), kept as `recorded` keeps it
(secrets masked, NUL characters dropped; an assistant's call as `typed`, aiteam's API tokens masked too)."""
from __future__ import annotations

import hashlib

from agents.llm.pricing import cost_usd
from agents.llm.redact import recorded, typed
from agents.llm.replay import CallRecord
from lifecycle.models import LLMCall


def context_sources(context: object) -> list[dict]:
    """What a repository context carried and why (agents.schemas.repository: never shown to the model), as
    LLMCall.context_sources stores it; [] for any other context."""
    return [source.model_dump(exclude_none=True) for source in getattr(context, "sources", None) or []]


def llm_call_record(record: CallRecord, *, requirement_id, step_id: int | None,
                    sources: list[dict] | None = None, message_id: int | None = None) -> LLMCall:
    request, response = record.request, record.response
    recorded_as = typed if message_id is not None else recorded  # an assistant's call: what a person typed
    usage = response.usage if response else None
    model = response.model if response else request.model
    return LLMCall.objects.create(
        requirement_id=requirement_id, step_id=step_id, message_id=message_id, role=request.role,
        provider=record.provider, model=model,
        system_sha256=hashlib.sha256(request.system.encode()).hexdigest(), system=recorded_as(request.system),
        messages=recorded_as(request.messages), tool_name=request.tool.name,
        params={"max_tokens": request.max_tokens, "requested_model": request.model},
        response=recorded_as({"content": response.content, "stop_reason": response.stop_reason}) if response else None,
        input_tokens=usage.input_tokens if usage else 0, output_tokens=usage.output_tokens if usage else 0,
        cache_read_tokens=usage.cache_read_tokens if usage else 0,
        cache_creation_tokens=usage.cache_creation_tokens if usage else 0,
        latency_ms=record.latency_ms, cost_usd=cost_usd(model, usage) if usage else 0, error=recorded_as(record.error),
        context_sources=sources or [],
    )
