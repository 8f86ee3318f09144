"""The Anthropic Messages API behind the provider protocol; the only module that imports `anthropic`.

The SDK does the retrying (timeouts, connection errors, 408/409/429/5xx, with backoff and
retry-after); this adapter only translates what is left into the LLMError family, with
every message redacted so the API key never reaches logs, LLMCall rows or error reports.

Celery's soft time limit is an Exception raised wherever the task is, usually inside the SDK's send, which
retries any Exception there as a connection error: another whole attempt, then the hard limit kills the worker.
The HTTP client below lets it through as itself.
"""
from __future__ import annotations

import logging
import re
import time
from typing import Any

import anthropic
from anthropic.types import Message
from celery.exceptions import SoftTimeLimitExceeded

from agents.llm.base import (
    LLMConfigError,
    LLMError,
    LLMRequest,
    LLMResponse,
    LLMTransientError,
    Usage,
)
from agents.llm.deadline import seconds_left
from agents.llm.redact import MASK, redact

log = logging.getLogger(__name__)

# The configured timeout is for an answer of up to this many tokens; a larger output limit gets a timeout as
# much longer (16,000 tokens: 3.9 × AITEAM_LLM_TIMEOUT_S), but never past the running step's deadline
# (agents.llm.deadline), less a margin for recording the call; a call so capped gets no SDK retries.
TIMEOUT_COVERS_TOKENS = 4096
DEADLINE_MARGIN_S = 5.0
MIN_TIMEOUT_S = 1.0
# Prompt caching (ADR 38): a request is read as tools → system → messages, and each cache_control marks the end of
# a prefix the API caches when it is long enough (1,024 tokens for Sonnet, 4,096 for recent Haiku and Opus 4.5).
# Up to four breakpoints: after the tool definitions (shared by a role's jobs that answer with the same tool),
# after the system prompt (every call of one job), after the context's stable fields (the job's further calls for
# the same requirement), and at the end of a conversation that goes on (tool-use and repair turns resend it whole).
CACHE = {"type": "ephemeral"}
FRAME = re.compile(r"<(data-[0-9a-f]+)>")  # agents.prompts.framed's data element
MISSING_KEY = (
    "ANTHROPIC_API_KEY is not set: set it to call the Anthropic API, "
    "or leave it unset (AITEAM_LLM_PROVIDER=replay) to replay recorded responses."
)


class AnthropicProvider:
    """Thread-safe, so one serves a whole process (agents.llm.factory): complete() keeps nothing of a call on self,
    and a call with fewer retries runs on a `with_options` copy that shares this client's connection pool."""

    name = "anthropic"

    def __init__(self, *, api_key: str, timeout: float, max_retries: int, base_url: str | None = None) -> None:
        if not api_key.strip():
            raise LLMConfigError(MISSING_KEY)
        self._api_key = api_key
        self._timeout = timeout
        self._max_retries = max_retries
        # base_url=None lets the SDK read ANTHROPIC_BASE_URL (proxies, the tests' fake server).
        self._client = anthropic.Anthropic(api_key=api_key, timeout=timeout, max_retries=max_retries, base_url=base_url,
                                           http_client=_Interruptible(timeout=timeout))

    def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.monotonic()
        timeout, retries = self._attempts_for(request)
        client = self._client if retries == self._max_retries else self._client.with_options(max_retries=retries)
        try:
            message = client.messages.create(**_create_params(request), timeout=timeout)
        except _Interrupted as stop:
            raise stop.__cause__ from None
        except anthropic.AnthropicError as exc:
            error = self._translate(exc, timeout=timeout, retries=retries)
        else:
            response = _to_response(message, request.tool_names, latency_ms=int((time.monotonic() - started) * 1000))
            _log_call(request, response)
            return response
        # Raised outside the except block so no __context__ keeps the SDK error, whose
        # request object carries the Authorization header.
        raise error

    def _attempts_for(self, request: LLMRequest) -> tuple[float, int]:
        """The timeout of each attempt and the SDK retries after the first: the configured timeout scaled by the
        output limit, and the configured retries. A step's deadline closer than that caps the timeout and drops
        the retries: a retry would run past the deadline, where the worker's soft limit ends it mid-read."""
        timeout = self._timeout * max(1.0, request.max_tokens / TIMEOUT_COVERS_TOKENS)
        left = seconds_left()
        if left is None or left - DEADLINE_MARGIN_S >= timeout:
            return timeout, self._max_retries
        return max(left - DEADLINE_MARGIN_S, MIN_TIMEOUT_S), 0

    def _translate(self, exc: anthropic.AnthropicError, *, timeout: float, retries: int) -> LLMError:
        """Map what is left after the SDK's own retries (`retries` of them, each of `timeout` seconds) onto
        transient vs permanent."""
        after = f"after {retries} retries"
        if isinstance(exc, anthropic.APITimeoutError):
            return LLMTransientError(self._clean(f"Anthropic API timed out ({timeout:.1f}s per attempt, {after})"))
        if isinstance(exc, anthropic.APIConnectionError):
            return LLMTransientError(self._clean(f"Anthropic API unreachable ({after}): {exc.__cause__ or exc}"))
        if isinstance(exc, anthropic.APIStatusError):
            return self._status_error(exc, after)
        return LLMError(self._clean(f"Anthropic SDK error: {type(exc).__name__}: {exc}"))

    def _status_error(self, exc: anthropic.APIStatusError, after: str) -> LLMError:
        status = exc.status_code
        # A proxy may answer with a whole HTML page: keep the first lines of it.
        detail = f"{exc.type or 'error'}: {str(exc.api_message or exc.body or 'no message')[:500]}"
        text = self._clean(f"Anthropic API {status} {detail} (request_id {exc.request_id})")
        if _is_transient(exc):
            return LLMTransientError(f"{text} {after}")
        if status in (401, 403):
            return LLMConfigError(f"{text}; check ANTHROPIC_API_KEY and the key's access to this model")
        return LLMError(text)

    def _clean(self, text: str) -> str:
        # redact() knows keys from the environment and sk-ant-shaped ones; the key this
        # provider was given may be neither, so mask it by value first.
        return redact(text.replace(self._api_key, MASK))


class _Interrupted(BaseException):
    """Carries the soft time limit past the SDK's `except Exception` (its cause is the limit)."""


class _Interruptible(anthropic.DefaultHttpxClient):
    def send(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().send(*args, **kwargs)
        except SoftTimeLimitExceeded as limit:
            raise _Interrupted() from limit


def _is_transient(exc: anthropic.APIStatusError) -> bool:
    """Whether a later call may succeed: the API's own `x-should-retry` verdict when it gives one, as the SDK's
    retries obey it; else the statuses the SDK retries (request timeout, lock conflict, rate limit, 5xx incl. 529
    overloaded)."""
    verdict = exc.response.headers.get("x-should-retry")
    if verdict in ("true", "false"):
        return verdict == "true"
    status = exc.status_code
    return status in (408, 409, 429) or status >= 500


def _create_params(request: LLMRequest) -> dict[str, Any]:
    # No temperature: SDK 2.x dropped sampling parameters and API version 2026-10-21
    # (which it sends) answers 400 to temperature/top_p/top_k, even at their defaults.
    tools = [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
             for t in (request.tool, *request.tools)]
    # one tool call: the repair turn (or the tool's result) answers one, and an unanswered tool_use would be a 400;
    # with several tools the model picks which ("any": it must call one)
    choice = ({"type": "any"} if request.tools else {"type": "tool", "name": request.tool.name})
    messages = _stable_frame_apart(request.messages)
    return {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "system": [{"type": "text", "text": request.system, "cache_control": CACHE}],
        "messages": _with_breakpoint_at_end(messages) if _continues(request) else messages,
        "tools": [*tools[:-1], {**tools[-1], "cache_control": CACHE}],
        "tool_choice": {**choice, "disable_parallel_tool_use": True},
    }


def _stable_frame_apart(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first message as two blocks when a role sent its context's stable fields in a frame of their own before
    the rest (agents.roles.base): that frame, with the task line before it, ends a prefix each of the job's calls
    for the requirement repeats, so it gets a breakpoint. The text is unchanged, only cut after the first frame."""
    first = messages[0] if messages else {}
    content = first.get("content")
    opening = FRAME.search(content) if isinstance(content, str) else None
    if opening is None:
        return messages
    closing = f"\n</{opening.group(1)}>"
    cut = content.find(closing) + len(closing)  # the data cannot hold its own closing tag: this is the frame's end
    if cut < len(closing) or not content[cut:].strip():
        return messages
    blocks = [{"type": "text", "text": content[:cut], "cache_control": CACHE}, {"type": "text", "text": content[cut:]}]
    return [{**first, "content": blocks}, *messages[1:]]


def _continues(request: LLMRequest) -> bool:
    """Whether a later request is likely to resend this conversation: a tool-use turn (the model answers with a
    tool to run, then is asked again) or a turn past the first (a repair, which may need another). A one-off
    call is not marked: writing its whole prompt costs a quarter more than sending it, and nothing reads it."""
    return bool(request.tools) or len(request.messages) > 1


def _with_breakpoint_at_end(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with a cache breakpoint on their last block, copied (the request's own are recorded and echoed
    as they are): a repair turn or the next tool-use turn resends this whole conversation and reads it back."""
    if not messages:
        return messages
    *earlier, last = messages
    content = last["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    if not blocks:
        return messages
    return [*earlier, {**last, "content": [*blocks[:-1], {**blocks[-1], "cache_control": CACHE}]}]


def _to_response(message: Message, names: tuple[str, ...], *, latency_ms: int) -> LLMResponse:
    # exclude_none: the SDK models fill absent optional fields with None (tool_use `caller`,
    # `toolset_name`), and a repair turn echoes these blocks back; the request types do not
    # allow a null `caller`, so send back only what the API sent.
    content = [block.model_dump(mode="json", exclude_none=True) for block in message.content]
    tool_use = next((b for b in content if b.get("type") == "tool_use" and b.get("name") in names), None)
    usage = message.usage
    return LLMResponse(
        tool_input=tool_use.get("input") if tool_use else None,
        content=content,
        model=message.model,
        usage=Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_input_tokens or 0,
            cache_creation_tokens=usage.cache_creation_input_tokens or 0,
        ),
        stop_reason=message.stop_reason or "",
        latency_ms=latency_ms,
        tool_name=tool_use.get("name", "") if tool_use else "",
    )


def _log_call(request: LLMRequest, response: LLMResponse) -> None:
    u = response.usage
    log.info(
        "anthropic call role=%s model=%s in=%d out=%d cache_read=%d cache_write=%d stop=%s latency_ms=%d",
        request.role, response.model, u.input_tokens, u.output_tokens,
        u.cache_read_tokens, u.cache_creation_tokens, response.stop_reason, response.latency_ms,
    )
