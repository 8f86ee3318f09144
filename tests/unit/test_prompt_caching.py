"""Prompt caching: the fake API's cache accounting follows the documented rules, and the provider lays a request
out so that its repeated calls read their shared prefix back (ADR 38)."""
from __future__ import annotations

import pytest

from agents.llm.anthropic_provider import AnthropicProvider
from agents.llm.base import LLMRequest, ToolSpec
from agents.llm.client import LLM
from agents.llm.structured import generate, tool_for
from agents.llm.tool_use import Tool, converse
from agents.roles import BUSINESS_ANALYST, PRODUCT_OWNER
from agents.schemas import BusinessAnalystContext, ProductOwnerContext, ProductOwnerOutput
from agents.schemas.product import RequirementDocView, StoryFeedback
from tests.answers import BA_STORIES, PO_CLEAR
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.prompt_cache import TTL_S, PromptCache, TooManyBreakpoints, estimate_tokens, min_cacheable

CACHE = {"type": "ephemeral"}
SONNET, HAIKU = "claude-sonnet-5-5", "claude-haiku-5-5"
LONG = "x" * 8000  # 2,000 tokens and some: over Sonnet's minimum, under Haiku's
TOOL = {"name": "submit", "description": "d", "input_schema": {"type": "object"}}
CHOICE = {"type": "tool", "name": "submit"}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def body(system: str = LONG, user: str = "question", model: str = SONNET, marked: bool = True,
         choice: dict | None = None) -> dict:
    block = {"type": "text", "text": system, **({"cache_control": CACHE} if marked else {})}
    return {"model": model, "tools": [TOOL], "system": [block], "tool_choice": choice or CHOICE,
            "messages": [{"role": "user", "content": user}]}


def whole(b: dict) -> int:
    return sum(estimate_tokens(t) for t in b["tools"]) + estimate_tokens(b["system"][0]) + estimate_tokens(
        {"role": "user", "type": "text", "text": b["messages"][0]["content"]})


def test_the_first_request_writes_its_prefix_and_the_next_one_reads_it():
    cache = PromptCache()
    first, second = cache.usage(body()), cache.usage(body(user="another question"))
    prefix = whole(body()) - estimate_tokens({"role": "user", "type": "text", "text": "question"})
    assert first == {"cache_creation_input_tokens": prefix, "cache_read_input_tokens": 0,
                     "input_tokens": whole(body()) - prefix}
    assert second["cache_read_input_tokens"] == prefix and second["cache_creation_input_tokens"] == 0
    assert sum(second.values()) == whole(body(user="another question"))  # the three add up to the input


def test_a_prefix_under_the_models_minimum_is_not_cached():
    cache = PromptCache()
    for _ in range(2):
        usage = cache.usage(body(model=HAIKU))  # ~2,000 tokens: Haiku 4.5 caches from 4,096
        assert usage["cache_read_input_tokens"] == usage["cache_creation_input_tokens"] == 0
    assert (min_cacheable("claude-sonnet-5-5"), min_cacheable("claude-haiku-5-5"), min_cacheable("claude-3-haiku-x"),
            min_cacheable("claude-opus-4-5-20251101")) == (1024, 4096, 2048, 4096)


def test_nothing_is_cached_without_a_breakpoint_or_across_models():
    cache = PromptCache()
    cache.usage(body(marked=False))
    assert cache.usage(body(marked=False))["cache_read_input_tokens"] == 0
    cache.usage(body(model="claude-opus-5"))
    assert cache.usage(body())["cache_read_input_tokens"] == 0  # written for another model


def test_an_entry_expires_five_minutes_after_its_last_use_and_a_read_refreshes_it():
    clock = Clock()
    cache = PromptCache(clock)
    cache.usage(body())
    clock.now = TTL_S - 1
    assert cache.usage(body())["cache_read_input_tokens"] > 0
    clock.now = 2 * TTL_S - 2  # under five minutes since the read
    assert cache.usage(body())["cache_read_input_tokens"] > 0
    clock.now += TTL_S
    assert cache.usage(body())["cache_read_input_tokens"] == 0


def test_a_change_before_the_breakpoint_misses_and_a_new_tool_choice_misses_the_messages_only():
    cache = PromptCache()
    cache.usage(body())
    assert cache.usage(body(system=LONG + "!"))["cache_read_input_tokens"] == 0
    conversation = {**body(), "messages": [{"role": "user", "content": [{"type": "text", "text": LONG,
                                                                         "cache_control": CACHE}]}]}
    cache.usage(conversation)
    other_choice = {**conversation, "tool_choice": {"type": "any"}}
    assert cache.usage(other_choice)["cache_read_input_tokens"] == whole(body()) - estimate_tokens(
        {"role": "user", "type": "text", "text": "question"})  # tools and system still read, the message not


def test_more_than_four_breakpoints_is_refused():
    tools = [{**TOOL, "name": f"t{i}", "cache_control": CACHE} for i in range(4)]
    with pytest.raises(TooManyBreakpoints, match="Found 5"):
        PromptCache().usage({**body(), "tools": tools})


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    with FakeAnthropicServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


class Keeping:
    """The provider, keeping each answer's usage."""

    def __init__(self, inner: AnthropicProvider) -> None:
        self.inner, self.usages = inner, []

    def complete(self, request: LLMRequest):
        response = self.inner.complete(request)
        self.usages.append(response.usage)
        return response


def test_repair_turns_read_the_conversation_back_and_a_one_off_call_writes_only_tools_and_system(fake):
    """The provider's breakpoints: tools, system, and the end of a conversation that goes on (a repair resends
    it); the first call's own message is not written, since most calls are never repeated."""
    fake.enqueue_tool_use({"summary": "no verdict"})
    fake.enqueue_tool_use({"summary": "still no verdict"})
    fake.enqueue_tool_use(PO_CLEAR)
    provider = Keeping(AnthropicProvider(api_key="sk-test", timeout=5.0, max_retries=0))
    generate(provider, role="product_owner", model=SONNET, system=LONG, schema=ProductOwnerOutput,
             messages=[{"role": "user", "content": "Clarify this brief. " + LONG}])
    first, repair, again = (r.body for r in fake.requests)
    assert first["tools"][-1]["cache_control"] == CACHE and first["system"][-1]["cache_control"] == CACHE
    assert first["messages"] == [{"role": "user", "content": "Clarify this brief. " + LONG}]  # not marked
    assert repair["messages"][-1]["content"][-1]["cache_control"] == CACHE
    assert "cache_control" not in str(again["messages"][:-1])  # only the end of the conversation is marked
    one_off, second, third = provider.usages
    assert one_off.cache_creation_tokens > 2000 and one_off.input_tokens > 2000  # the system written, the brief not
    assert second.cache_read_tokens == one_off.cache_creation_tokens
    whole_second = second.cache_read_tokens + second.cache_creation_tokens + second.input_tokens
    assert second.input_tokens == 0 and third.cache_read_tokens == whole_second  # all the repair sent, read back


def test_a_tool_use_turn_reads_the_turn_before_it_whole(fake):
    lookup = Tool(ToolSpec(name="lookup", description="Look it up.", input_schema={"type": "object"}),
                  run=lambda arguments: "found: " + LONG)
    fake.enqueue_tool_use({"what": "stories"}, name="lookup")
    fake.enqueue_tool_use(PO_CLEAR, name=tool_for(ProductOwnerOutput).name)
    provider = Keeping(AnthropicProvider(api_key="sk-test", timeout=5.0, max_retries=0))
    converse(provider, role="product_owner", model=SONNET, system="Answer.", tools=[lookup],
             finish=ProductOwnerOutput, messages=[{"role": "user", "content": "Clarify this brief. " + LONG}])
    first, second = provider.usages
    assert first.input_tokens == 0 and first.cache_creation_tokens > 2000  # a turn that goes on: written whole
    assert second.cache_read_tokens == first.cache_creation_tokens  # and read back by the next turn


def test_a_request_is_not_changed_by_the_breakpoints_the_provider_adds(fake):
    fake.enqueue_tool_use({"title": "x"})
    messages = [{"role": "user", "content": "hello"}]
    tool = ToolSpec(name="submit", description="d", input_schema={"type": "object"})
    AnthropicProvider(api_key="sk-test", timeout=5.0, max_retries=0).complete(
        LLMRequest(role="r", model=SONNET, system="s", messages=messages, tool=tool))
    assert messages == [{"role": "user", "content": "hello"}]  # recorded and echoed as the role built it


def ba_context(round: int) -> BusinessAnalystContext:
    feedback = [StoryFeedback(round=1, decision="reject", text="Split the first story.")] if round > 1 else []
    return BusinessAnalystContext(title="Reading list", brief="A reading list service. " * 300, round=round,
                                  doc=RequirementDocView(summary="Books to read.", objectives=["list books"]),
                                  feedback=feedback)


def test_a_roles_stable_fields_come_first_in_a_frame_of_their_own():
    [message] = BUSINESS_ANALYST.messages(ba_context(2))
    stable, _, rest = message["content"].partition("\n\nThen the rest of its data")
    assert '"brief": "A reading list' in stable and '"doc": {' in stable and '"feedback"' not in stable
    assert '"round": 2' in rest and "Split the first story." in rest and '"brief"' not in rest
    alone = ProductOwnerContext(title="Reading list", brief="A reading list service.")  # only stable fields but one
    assert "Then the rest" in PRODUCT_OWNER.messages(alone)[0]["content"]  # clarifications: [] is the rest


def test_a_second_round_reads_tools_system_and_the_stable_frame_back(fake):
    """The BA's rounds share the brief and the clarified requirement: its second round reads them from cache."""
    fake.enqueue_tool_use(BA_STORIES)
    fake.enqueue_tool_use(BA_STORIES)
    provider = Keeping(AnthropicProvider(api_key="sk-test", timeout=5.0, max_retries=0))
    llm = LLM(provider, {}, SONNET)
    for round in (1, 2):
        BUSINESS_ANALYST.run(ba_context(round), llm)
    first, second = (r.body for r in fake.requests)
    stable, rest = first["messages"][0]["content"]
    assert stable["cache_control"] == CACHE and "cache_control" not in rest
    assert stable["text"] + rest["text"] == BUSINESS_ANALYST.messages(ba_context(1))[0]["content"]  # text as sent
    written, read = provider.usages
    assert read.cache_read_tokens == written.cache_creation_tokens > 1024
    assert read.input_tokens < read.cache_read_tokens / 10  # the round's own feedback is all that is sent anew


def test_a_message_of_one_frame_is_sent_as_it_is(fake):
    fake.enqueue_tool_use({"title": "x"})
    tool = ToolSpec(name="submit", description="d", input_schema={"type": "object"})
    one = PRODUCT_OWNER.messages(ProductOwnerContext(title="t", brief="b"))[0]["content"].split("\n\nThen")[0]
    AnthropicProvider(api_key="sk-test", timeout=5.0, max_retries=0).complete(
        LLMRequest(role="r", model=SONNET, system="s", messages=[{"role": "user", "content": one}], tool=tool))
    assert fake.requests[0].body["messages"] == [{"role": "user", "content": one}]


def test_the_bench_prices_each_layout_at_the_price_list():
    """bench/cache_share.py judges a layout by its cost: a write at 1.25x the input price, a read at 0.1x."""
    from decimal import Decimal

    from bench.cache_share import priced, uncached

    tokens, read, cost = priced([body(), body()])
    written = whole(body()) - estimate_tokens({"role": "user", "type": "text", "text": "question"})
    assert (tokens, read) == (2 * whole(body()), written)
    assert cost == (written * Decimal("3.75") + written * Decimal("0.30") + (tokens - 2 * written) * 3) / 1_000_000
    assert priced([uncached(body()), uncached(body())]) == (tokens, 0, Decimal(tokens * 3) / 1_000_000)


def test_one_prefix_across_roles_lets_a_later_role_read_an_earlier_ones_context(settings):
    """The what-if layout the bench prices (issue 25's proposal): same tools, tool_choice and system for every
    role of a model, then the requirement's stable fields, so the BA reads what the PO's request wrote."""
    from agents.llm.anthropic_provider import _create_params
    from agents.prompts import load_prompt, with_data_rule
    from bench.cache_share import one_prefix

    model = settings.AITEAM_MODELS["strong"]
    requests = [LLMRequest(role=agent.role, model=model, system=with_data_rule(load_prompt(agent.role)),
                           messages=agent.messages(context), tool=tool_for(agent.output))
                for agent, context in ((PRODUCT_OWNER, ProductOwnerContext(title="Reading list", brief=ba_context(1).brief)),
                                       (BUSINESS_ANALYST, ba_context(1)))]
    po, ba = one_prefix([_create_params(r) for r in requests])
    assert (po["tools"], po["tool_choice"], po["system"]) == (ba["tools"], ba["tool_choice"], ba["system"])
    assert ba["messages"][0]["content"][0] == {"type": "text", "text": '{\n  "title": "Reading list"\n}'}
    cache = PromptCache()
    written, read = cache.usage(po)["cache_creation_input_tokens"], cache.usage(ba)["cache_read_input_tokens"]
    assert read == written > estimate_tokens({"type": "text", "text": ba_context(1).brief})  # the brief among it
