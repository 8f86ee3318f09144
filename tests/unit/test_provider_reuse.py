"""One Anthropic client per process and configuration, so calls reuse its kept-alive connection: the real SDK
against the fake Messages API (HTTP/1.1, like the API) on a local socket, seen from the connection each request
came on."""
from __future__ import annotations

import multiprocessing
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from agents.llm.base import LLMRequest, ToolSpec
from agents.llm.deadline import deadline_in
from agents.llm.factory import provider_from_settings
from aiteam.timeouts import StepTimeouts
from tests.fakes.anthropic_server import FakeAnthropicServer

KEY = "sk-ant-test-" + secrets.token_hex(8)
TOOL = ToolSpec(name="submit_answer", description="The answer.", input_schema={"type": "object"})
REQUEST = LLMRequest(role="analyst", model="claude-test-model", system="s",
                     messages=[{"role": "user", "content": "x"}], tool=TOOL)


@pytest.fixture
def fake(settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        server.respond_with(lambda body: (None, {"answer": "ok"}))
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        settings.AITEAM_LLM_PROVIDER, settings.ANTHROPIC_API_KEY = "anthropic", KEY
        settings.STEP_TIMEOUTS = StepTimeouts(5.0, 2, 60, 70, 80, 3600)
        yield server


def _step() -> None:
    """A model call as a step makes it."""
    provider_from_settings().complete(REQUEST)


def _call(fake: FakeAnthropicServer) -> tuple[str, int]:
    """A step's call, and the client connection it came on."""
    _step()
    return fake.requests[-1].peer


def test_steps_share_one_client_and_its_connection(fake):
    first = _call(fake)
    assert _call(fake) == first
    with deadline_in(3.0):  # capped: no retries, so a with_options copy of the client, sharing its pool
        provider_from_settings().complete(REQUEST)
    assert fake.requests[-1].peer == first
    assert provider_from_settings() is provider_from_settings()


def test_threads_that_start_together_share_one_client(fake, settings):
    settings.STEP_TIMEOUTS = StepTimeouts(7.0, 2, 60, 70, 80, 3600)  # a configuration no thread has seen yet
    with ThreadPoolExecutor(16) as pool:
        providers = list(pool.map(lambda _: provider_from_settings(), range(16)))
    assert all(p is providers[0] for p in providers)


def test_a_changed_setting_gets_a_new_client_on_a_new_connection(fake, settings):
    before, first = provider_from_settings(), _call(fake)

    settings.STEP_TIMEOUTS = StepTimeouts(6.0, 2, 60, 70, 80, 3600)
    retimed, second = provider_from_settings(), _call(fake)
    assert retimed is not before and second != first

    settings.ANTHROPIC_API_KEY = KEY + "-rotated"
    assert _call(fake) not in (first, second)
    assert fake.requests[-1].headers["authorization"] == f"Bearer {KEY}-rotated"


def test_a_changed_base_url_reaches_the_new_server(fake, monkeypatch):
    _call(fake)
    with FakeAnthropicServer() as other:
        other.respond_with(lambda body: (None, {"answer": "elsewhere"}))
        monkeypatch.setenv("ANTHROPIC_BASE_URL", other.url)
        assert provider_from_settings().complete(REQUEST).tool_input == {"answer": "elsewhere"}
    assert len(fake.requests) == 1 and len(other.requests) == 1


def test_a_forked_process_opens_its_own_connection(fake):
    parent = _call(fake)
    child = multiprocessing.get_context("fork").Process(target=_step)
    child.start()
    child.join(timeout=10)
    assert child.exitcode == 0 and len(fake.requests) == 2
    assert fake.requests[-1].peer != parent  # not a share of the parent's socket
    assert _call(fake) == parent  # which stays the parent's own
