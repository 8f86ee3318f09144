"""A canary API key pushed through every error path of a real step never shows up anywhere:
logs, LLMCall rows, step errors, review tasks, audit rows, outbox events, cassettes."""
import json
import logging
import secrets
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core import serializers

from aiteam.timeouts import StepTimeouts
from lifecycle.models import LLMCall, OutboxEvent, ReviewTask, StateTransition, Step
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.flows import fresh, submit

pytestmark = pytest.mark.django_db(transaction=True)
CANARY = "sk-ant-canary-" + secrets.token_hex(16)
LEAKY = {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {CANARY}"}}


@pytest.fixture
def anthropic(settings, monkeypatch):
    with FakeAnthropicServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
        settings.AITEAM_LLM_PROVIDER, settings.ANTHROPIC_API_KEY = "anthropic", CANARY
        settings.STEP_TIMEOUTS = StepTimeouts(1.0, 0, 60, 70, 80, 3600)
        yield server


def everything_stored() -> str:
    rows = [*LLMCall.objects.all(), *Step.objects.all(), *ReviewTask.objects.all(),
            *StateTransition.objects.all(), *OutboxEvent.objects.all()]
    return serializers.serialize("json", rows)


def assert_no_canary(caplog) -> None:
    assert CANARY not in everything_stored()
    assert CANARY not in caplog.text
    assert all(CANARY not in r.getMessage() for r in caplog.records)


def test_an_auth_error_that_echoes_the_key_stores_and_logs_no_key(anthropic, alice, caplog):
    caplog.set_level(logging.DEBUG)
    anthropic.enqueue_status(401, LEAKY)
    req = submit(alice)
    assert fresh(req).state == "received"
    step = Step.objects.get(requirement=req)
    assert step.state == "failed" and "401" in step.error
    assert req.review_tasks.get(kind="step_failed").reasoning == step.error
    assert LLMCall.objects.get().error
    assert_no_canary(caplog)


def test_overload_that_echoes_the_key_is_retried_and_stores_no_key(anthropic, alice, caplog, settings):
    caplog.set_level(logging.DEBUG)
    for _ in range(settings.AITEAM_STEP_MAX_RUNS):
        anthropic.enqueue_status(529, {"type": "error", "error": {"type": "overloaded_error", "message": CANARY}})
    req = submit(alice)
    assert LLMCall.objects.filter(error__startswith="LLMTransientError").count() == settings.AITEAM_STEP_MAX_RUNS
    assert fresh(req).state == "received" and Step.objects.get().state == "failed"
    assert req.review_tasks.get(kind="step_failed").is_pending  # out of runs: a human decides
    assert_no_canary(caplog)


def test_invalid_answers_that_quote_the_key_store_no_key(anthropic, alice, caplog):
    caplog.set_level(logging.DEBUG)
    for _ in range(3):
        anthropic.enqueue_tool_use({"verdict": "clear", "reasoning": f"my key is {CANARY}"})
    req = submit(alice)
    assert Step.objects.get(requirement=req).state == "failed"
    assert LLMCall.objects.count() == 3
    assert_no_canary(caplog)


def test_a_normal_run_through_the_sdk_records_tokens_and_no_key(anthropic, alice, caplog):
    from tests.answers import BA_STORIES, PO_CLEAR

    caplog.set_level(logging.DEBUG)
    anthropic.enqueue_tool_use(PO_CLEAR, usage={"input_tokens": 1000, "output_tokens": 200,
                                                "cache_read_input_tokens": 800, "cache_creation_input_tokens": 0})
    anthropic.enqueue_tool_use(BA_STORIES)
    req = submit(alice)
    assert fresh(req).state == "user_stories_created"
    po_call = LLMCall.objects.filter(role="product_owner").get()
    assert (po_call.provider, po_call.input_tokens, po_call.cache_read_tokens) == ("anthropic", 1000, 800)
    assert po_call.cost_usd > 0
    assert all(r.body["tool_choice"]["type"] == "tool" for r in anthropic.requests)
    assert_no_canary(caplog)


def test_bundled_cassettes_hold_no_key():
    for path in Path(django_settings.BASE_DIR, "agents/cassettes").rglob("*.*"):
        text = path.read_text()
        assert "sk-ant-" not in text, path
        if path.suffix == ".json":
            json.loads(text)
