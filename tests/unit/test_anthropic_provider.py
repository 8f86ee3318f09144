"""The Anthropic adapter against a fake Messages API on a local socket: the real SDK,
its real retries and timeouts, no network and no real key."""
from __future__ import annotations

import logging
import secrets
import signal
import socket
import time
import traceback
from collections.abc import Callable, Iterator

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from pydantic import BaseModel, Field

from agents.llm.anthropic_provider import AnthropicProvider
from agents.llm.base import (
    LLMConfigError,
    LLMError,
    LLMInvalidOutputError,
    LLMOutputTruncated,
    LLMRequest,
    LLMTransientError,
    ToolSpec,
)
from agents.llm.structured import generate
from tests.fakes.anthropic_server import FakeAnthropicServer

CANARY = "sk-ant-canary-" + secrets.token_hex(16)
MODEL = "claude-test-model"
TOOL = ToolSpec(
    name="submit_answer",
    description="The answer.",
    input_schema={"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
)
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
RATE_LIMITED = {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}


class Answer(BaseModel):
    """A titled answer worth some points."""

    title: str
    points: int = Field(ge=1)


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as fake:
        yield fake


@pytest.fixture
def make_provider(server: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch) -> Callable[..., AnthropicProvider]:
    # No base_url below: the provider must reach the fake through ANTHROPIC_BASE_URL alone.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    # Without the key in the environment, redact() cannot mask it by value: the provider must.
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_CUSTOM_HEADERS"):
        monkeypatch.delenv(name, raising=False)

    def make(timeout: float = 1.0, max_retries: int = 2, api_key: str = CANARY) -> AnthropicProvider:
        return AnthropicProvider(api_key=api_key, timeout=timeout, max_retries=max_retries)

    return make


@pytest.fixture
def provider(make_provider: Callable[..., AnthropicProvider]) -> AnthropicProvider:
    return make_provider()


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    # Everything the SDK and its HTTP stack log, at the most verbose level.
    for name in (None, "anthropic", "httpx2", "httpcore2", "agents"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def _request(messages: list[dict] | None = None) -> LLMRequest:
    return LLMRequest(
        role="analyst", model=MODEL, system="You are the analyst.",
        messages=messages or [{"role": "user", "content": "Summarise."}], tool=TOOL,
    )


def _sent_key(headers: dict[str, str]) -> str:
    # SDK 2.x sends the key as `Authorization: Bearer`; 1.x sent `x-api-key`.
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")


def _assert_no_canary(exc: BaseException, caplog: pytest.LogCaptureFixture, secret: str = CANARY) -> None:
    assert secret not in str(exc)
    assert secret not in repr(exc)
    assert secret not in "".join(traceback.format_exception(exc))
    assert caplog.records, "expected the SDK's debug logs to be captured"
    for record in caplog.records:
        assert secret not in record.getMessage()
        assert secret not in caplog.handler.format(record)


def test_a_normal_answer_returns_the_forced_tool_input_and_usage(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    usage = {"input_tokens": 120, "output_tokens": 30,
             "cache_read_input_tokens": 100, "cache_creation_input_tokens": 15}
    server.enqueue_tool_use({"title": "Done"}, usage=usage)

    response = provider.complete(_request())

    assert response.tool_input == {"title": "Done"}
    assert (response.usage.input_tokens, response.usage.output_tokens) == (120, 30)
    assert (response.usage.cache_read_tokens, response.usage.cache_creation_tokens) == (100, 15)
    assert response.stop_reason == "tool_use"
    assert response.model == MODEL
    assert response.content[0]["type"] == "tool_use" and response.content[0]["name"] == TOOL.name
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    assert sent.body["model"] == MODEL
    # one tool call only: a repair answers one tool_use, and one left unanswered would be a 400
    assert sent.body["tool_choice"] == {"type": "tool", "name": TOOL.name, "disable_parallel_tool_use": True}
    assert sent.body["tools"] == [  # each cache breakpoint ends a prefix: tools, then system, then the messages
        {"name": TOOL.name, "description": TOOL.description, "input_schema": TOOL.input_schema,
         "cache_control": {"type": "ephemeral"}}
    ]
    assert sent.body["system"] == [
        {"type": "text", "text": "You are the analyst.", "cache_control": {"type": "ephemeral"}}
    ]
    assert "temperature" not in sent.body  # API 2026-10-21 rejects sampling parameters
    assert _sent_key(sent.headers) == CANARY


def test_missing_cache_counts_read_as_zero(server: FakeAnthropicServer, provider: AnthropicProvider) -> None:
    nulls = {"cache_read_input_tokens": None, "cache_creation_input_tokens": None}
    server.enqueue_tool_use({"title": "x"}, usage=nulls)

    usage = provider.complete(_request()).usage

    assert (usage.cache_read_tokens, usage.cache_creation_tokens) == (0, 0)


def test_an_answer_for_another_tool_has_no_tool_input(server: FakeAnthropicServer, provider: AnthropicProvider) -> None:
    server.enqueue_tool_use({"title": "x"}, name="some_other_tool")

    response = provider.complete(_request())

    assert response.tool_input is None
    assert response.content[0]["name"] == "some_other_tool"


def test_latency_covers_the_whole_call(server: FakeAnthropicServer, provider: AnthropicProvider) -> None:
    server.enqueue_delay(0.2, then={"title": "slow"})

    response = provider.complete(_request())

    assert response.tool_input == {"title": "slow"}
    assert response.latency_ms >= 200


def test_an_overloaded_api_is_retried_by_the_sdk(server: FakeAnthropicServer, provider: AnthropicProvider) -> None:
    server.enqueue_status(529, OVERLOADED)
    server.enqueue_tool_use({"title": "second time lucky"})

    response = provider.complete(_request())

    assert response.tool_input == {"title": "second time lucky"}
    assert len(server.requests) == 2


def test_a_rate_limit_is_retried_by_the_sdk(server: FakeAnthropicServer, provider: AnthropicProvider) -> None:
    server.enqueue_status(429, RATE_LIMITED, headers={"retry-after": "0"})
    server.enqueue_tool_use({"title": "after the wait"})

    response = provider.complete(_request())

    assert response.tool_input == {"title": "after the wait"}
    assert len(server.requests) == 2


def test_overload_beyond_the_retries_is_transient(
    server: FakeAnthropicServer, provider: AnthropicProvider, logs: pytest.LogCaptureFixture
) -> None:
    for _ in range(3):
        server.enqueue_status(529, OVERLOADED)

    with pytest.raises(LLMTransientError) as caught:
        provider.complete(_request())

    assert len(server.requests) == 3  # 1 + max_retries
    assert "529" in str(caught.value) and "overloaded_error" in str(caught.value)
    _assert_no_canary(caught.value, logs)


def test_a_timeout_on_every_attempt_is_transient(
    server: FakeAnthropicServer, make_provider: Callable[..., AnthropicProvider]
) -> None:
    provider = make_provider(timeout=0.5, max_retries=1)
    server.enqueue_delay(3.0)
    server.enqueue_delay(3.0)

    started = time.monotonic()
    with pytest.raises(LLMTransientError, match="timed out"):
        provider.complete(_request())

    assert len(server.requests) == 2
    assert time.monotonic() - started < 5


def test_an_unreachable_api_is_transient(make_provider: Callable[..., AnthropicProvider]) -> None:
    with socket.socket() as probe:  # a port nobody listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = AnthropicProvider(api_key=CANARY, timeout=1.0, max_retries=0, base_url=f"http://127.0.0.1:{port}")

    with pytest.raises(LLMTransientError, match="unreachable"):
        provider.complete(_request())


def test_a_rejected_key_is_a_permanent_error_without_the_key(
    server: FakeAnthropicServer, provider: AnthropicProvider, logs: pytest.LogCaptureFixture
) -> None:
    # A proxy that echoes the key back in its error body must not leak it either.
    error = {"type": "authentication_error", "message": f"invalid x-api-key {CANARY}"}
    server.enqueue_status(401, {"type": "error", "error": error})

    with pytest.raises(LLMError) as caught:
        provider.complete(_request())

    assert not caught.value.transient
    assert isinstance(caught.value, LLMConfigError)
    assert "401" in str(caught.value) and "authentication_error" in str(caught.value)
    assert len(server.requests) == 1
    _assert_no_canary(caught.value, logs)


def test_a_key_of_any_shape_is_masked_in_errors(
    server: FakeAnthropicServer, make_provider: Callable[..., AnthropicProvider], logs: pytest.LogCaptureFixture
) -> None:
    odd_key = "proxy-token-" + secrets.token_hex(12)  # not sk-ant-shaped: only masking by value catches it
    error = {"type": "invalid_request_error", "message": f"bad {odd_key}"}
    server.enqueue_status(400, {"type": "error", "error": error})

    with pytest.raises(LLMError) as caught:
        make_provider(api_key=odd_key).complete(_request())

    assert not caught.value.transient
    _assert_no_canary(caught.value, logs, secret=odd_key)


def test_an_invalid_answer_is_repaired(server: FakeAnthropicServer, provider: AnthropicProvider) -> None:
    server.enqueue_tool_use({"title": "Plan", "points": 0})
    server.enqueue_tool_use({"title": "Plan", "points": 3})

    answer = generate(provider, role="analyst", model=MODEL, system="sys", messages=[{"role": "user", "content": "Go"}],
                      schema=Answer)

    assert answer == Answer(title="Plan", points=3)
    assert len(server.requests) == 2
    _, assistant, user = server.requests[1].body["messages"]
    [echoed] = assistant["content"]
    # Echoed exactly as received: no None-valued SDK fields the API would reject.
    assert assistant["role"] == "assistant"
    assert echoed == {"type": "tool_use", "id": echoed["id"], "name": "submit_answer",
                      "input": {"title": "Plan", "points": 0}}
    [result] = user["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == echoed["id"]
    assert result["is_error"] is True
    assert "points" in result["content"]


def test_an_answer_that_stays_invalid_fails_after_two_repairs(
    server: FakeAnthropicServer, provider: AnthropicProvider, logs: pytest.LogCaptureFixture
) -> None:
    for _ in range(3):
        server.enqueue_tool_use({"title": "Plan"})  # points missing every time

    with pytest.raises(LLMInvalidOutputError) as caught:
        generate(provider, role="analyst", model=MODEL, system="sys", messages=[{"role": "user", "content": "Go"}],
                 schema=Answer)

    assert len(server.requests) == 3
    assert "points" in str(caught.value)
    _assert_no_canary(caught.value, logs)


def test_a_missing_key_says_how_to_fix_it() -> None:
    for key in ("", "   "):
        with pytest.raises(LLMConfigError) as caught:
            AnthropicProvider(api_key=key, timeout=1.0, max_retries=0)

        assert "ANTHROPIC_API_KEY" in str(caught.value)
        assert "replay" in str(caught.value)


def test_an_answer_cut_off_at_max_tokens_fails_at_once_naming_the_setting(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.enqueue_tool_use({"title": "Do"}, stop_reason="max_tokens")
    with pytest.raises(LLMOutputTruncated, match=r"cut off at max_tokens=4096.*AITEAM_MAX_OUTPUT_TOKENS\['analyst'\]"):
        generate(provider, role="analyst", model=MODEL, system="s", messages=[{"role": "user", "content": "x"}],
                 schema=Answer)
    assert len(server.requests) == 1  # no repair turn: the same limit would cut the next answer off too


def test_a_larger_output_limit_gets_a_proportionally_longer_timeout(
    server: FakeAnthropicServer, make_provider: Callable[..., AnthropicProvider]
) -> None:
    provider = make_provider(timeout=0.5, max_retries=0)
    server.enqueue_delay(1.0, then={"title": "late"})
    server.enqueue_delay(1.0, then={"title": "late"})
    with pytest.raises(LLMTransientError, match="timed out"):
        provider.complete(_request())  # 4,096 tokens: 0.5 s
    big = LLMRequest(role="analyst", model=MODEL, system="s", messages=[{"role": "user", "content": "x"}], tool=TOOL,
                     max_tokens=4096 * 4)
    assert provider.complete(big).tool_input == {"title": "late"}  # 16,384 tokens: 2 s
    assert server.requests[1].body["max_tokens"] == 4096 * 4


def test_a_call_times_out_before_the_steps_deadline_whatever_its_output_limit(
    server: FakeAnthropicServer, make_provider: Callable[..., AnthropicProvider], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.llm import anthropic_provider
    from agents.llm.deadline import deadline_in

    monkeypatch.setattr(anthropic_provider, "DEADLINE_MARGIN_S", 0.2)
    provider = make_provider(timeout=5.0, max_retries=0)
    server.enqueue_delay(3.0, then={"title": "late"})
    big = LLMRequest(role="analyst", model=MODEL, system="s", messages=[{"role": "user", "content": "x"}], tool=TOOL,
                     max_tokens=4096 * 4)  # 20 s without a deadline
    started = time.monotonic()
    with deadline_in(1.2), pytest.raises(LLMTransientError, match="timed out"):
        provider.complete(big)  # 1.2 s left, less the margin: 1 s
    assert time.monotonic() - started < 2


def test_a_timeout_names_the_per_attempt_timeout_the_call_actually_had(
    server: FakeAnthropicServer, make_provider: Callable[..., AnthropicProvider]
) -> None:
    provider = make_provider(timeout=0.3, max_retries=0)
    server.enqueue_delay(3.0)
    big = LLMRequest(role="analyst", model=MODEL, system="s", messages=[{"role": "user", "content": "x"}], tool=TOOL,
                     max_tokens=4096 * 4)
    with pytest.raises(LLMTransientError, match=r"timed out \(1\.2s per attempt, after 0 retries\)"):
        provider.complete(big)  # 0.3 s scaled to 16,384 tokens


def test_a_call_capped_by_the_steps_deadline_is_not_retried_past_it(
    server: FakeAnthropicServer, make_provider: Callable[..., AnthropicProvider], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.llm import anthropic_provider
    from agents.llm.deadline import deadline_in

    monkeypatch.setattr(anthropic_provider, "DEADLINE_MARGIN_S", 0.2)
    provider = make_provider(timeout=5.0, max_retries=2)
    for _ in range(3):
        server.enqueue_delay(3.0)
    with deadline_in(1.2), pytest.raises(LLMTransientError, match=r"timed out \(1\.0s per attempt, after 0 retries\)"):
        provider.complete(_request())
    assert len(server.requests) == 1


def test_a_status_the_api_says_not_to_retry_is_permanent(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.enqueue_status(529, OVERLOADED, headers={"x-should-retry": "false"})

    with pytest.raises(LLMError) as caught:
        provider.complete(_request())

    assert not caught.value.transient and "529" in str(caught.value)
    assert len(server.requests) == 1  # the SDK obeyed the header too


def test_a_status_the_api_says_to_retry_is_transient(server: FakeAnthropicServer, provider: AnthropicProvider) -> None:
    conflict = {"type": "error", "error": {"type": "invalid_request_error", "message": "Try again"}}
    for _ in range(3):
        server.enqueue_status(400, conflict, headers={"x-should-retry": "true"})

    with pytest.raises(LLMTransientError, match="400 invalid_request_error"):
        provider.complete(_request())

    assert len(server.requests) == 3  # 1 + max_retries


def test_a_celery_soft_time_limit_stops_the_call_instead_of_being_retried(
    server: FakeAnthropicServer, make_provider: Callable[..., AnthropicProvider]
) -> None:
    """The SDK retries any Exception raised while sending; the soft time limit (an Exception, raised by a signal
    wherever the task is) must end the call at once, as itself."""
    provider = make_provider(timeout=5.0, max_retries=2)
    for _ in range(3):
        server.enqueue_delay(3.0)

    def soft_limit(signum, frame):
        raise SoftTimeLimitExceeded()

    previous = signal.signal(signal.SIGALRM, soft_limit)
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(SoftTimeLimitExceeded):
            provider.complete(_request())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 2 and len(server.requests) == 1
