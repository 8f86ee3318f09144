"""The share of input tokens read from the prompt cache over a run of the sample brief (ADR 38).

The sample brief runs through the real pipeline (`aiteam_demo --approve-deployment`: every step, the real runner,
eager Celery on a scratch SQLite database) with the Anthropic provider pointed (ANTHROPIC_BASE_URL, as the tests
do) at the fake Messages API of tests/fakes. The fake answers each request with the sample cassette's answer for
it and reports usage as the API would: cache reads and writes by prefix up to each breakpoint, with each model's
minimum (tests/fakes/prompt_cache.py; tokens estimated as bytes / 4). The figures are the LLMCall rows the run
recorded: per role and in total, input tokens read from cache / all input tokens (read + written + uncached), and
what that input costs at the price list (agents/llm/pricing.py: a write 1.25x the input price, a read 0.1x).

A share is only worth what it saves, so the same requests are then priced again through a fresh cache in other
layouts: as sent (it agrees with the rows), with no breakpoint at all (what the run would cost without caching),
and laid out to share one prefix across roles, as issue 25 proposed: every request of a model carrying the same
tools (all the team's output tools for that model, `tool_choice` any), one shared system prompt, then the
requirement's context (every stable field any role has sent so far, once each), then the role's own prompt and
data. That layout is built here from the requests only to be priced.

    python bench/cache_share.py               # the API's minimums
    python bench/cache_share.py --no-minimum  # every breakpoint cached: what the layout could share at best
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from decimal import Decimal
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CACHE = {"type": "ephemeral"}


def configure(var: Path, base_url: str) -> None:
    os.environ.update({"DJANGO_SETTINGS_MODULE": "aiteam.settings", "AITEAM_VAR_DIR": str(var),
                       "AITEAM_LLM_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "fake-key-for-the-local-fake",
                       "ANTHROPIC_BASE_URL": base_url, "AITEAM_AUTONOMOUS": "1", "AITEAM_LOG_LEVEL": "ERROR"})
    for name in ("DATABASE_URL", "CELERY_BROKER_URL"):
        os.environ.pop(name, None)
    os.environ.setdefault("DJANGO_SECRET_KEY", "aiteam-bench-only-not-a-secret")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def cassette_responder(cassette: Path):
    """Answer a request body with the cassette's answer for it, the role told by the system prompt it carries."""
    from agents.llm.base import LLMRequest, ToolSpec
    from agents.llm.replay import ReplayProvider
    from agents.prompts import prompt_files

    replay = ReplayProvider.from_file(cassette)
    roles = {i["role"] for i in replay.interactions}
    prompts = prompt_files()

    def role_of(system: str) -> str:
        name = max((n for n, text in prompts.items() if system.startswith(text.rstrip())), key=len)
        return max((r for r in roles if name.startswith(r)), key=len)

    def respond(body: dict) -> tuple[str | None, dict]:
        system = "".join(block["text"] for block in body["system"])
        tool, *others = (ToolSpec(t["name"], t.get("description", ""), t["input_schema"]) for t in body["tools"])
        request = LLMRequest(role=role_of(system), model=body["model"], system=system, messages=body["messages"],
                             tool=tool, tools=tuple(others))
        answer = replay.complete(request)
        return answer.tool_name, answer.tool_input or {}

    return respond


def shares() -> list[tuple[str, int, int, int, int, Decimal]]:
    """(role, calls, read, written, uncached, input cost in USD) per role, in the order the roles first called."""
    from agents.llm.base import Usage
    from agents.llm.pricing import cost_usd
    from lifecycle.models import LLMCall

    rows: dict[str, list] = {}
    for call in LLMCall.objects.order_by("id"):
        row = rows.setdefault(call.role, [0, 0, 0, 0, Decimal(0)])
        usage = Usage(call.input_tokens, 0, call.cache_read_tokens, call.cache_creation_tokens)
        for i, n in enumerate((1, call.cache_read_tokens, call.cache_creation_tokens, call.input_tokens,
                               cost_usd(call.model, usage))):
            row[i] += n
    return [(role, *row) for role, row in rows.items()]


def report(rows: list[tuple[str, int, int, int, int, Decimal]]) -> None:
    print(f"{'role':<18}{'calls':>6}{'read':>9}{'written':>9}{'uncached':>10}{'read share':>12}{'input USD':>12}")
    total = ("total", *(sum(c) for c in list(zip(*rows, strict=True))[1:]))
    for role, calls, read, written, uncached, cost in [*rows, total]:
        tokens = read + written + uncached
        print(f"{role:<18}{calls:>6}{read:>9}{written:>9}{uncached:>10}{read / tokens if tokens else 0:>12.1%}"
              f"{cost:>12.6f}")


def priced(bodies: list[dict]) -> tuple[int, int, Decimal]:
    """(input tokens, read from cache, input cost in USD) of these requests sent in order to a fresh cache."""
    from agents.llm.base import Usage
    from agents.llm.pricing import cost_usd
    from tests.fakes.prompt_cache import PromptCache

    cache, tokens, read, cost = PromptCache(), 0, 0, Decimal(0)
    for body in bodies:
        usage = cache.usage(body)
        tokens, read = tokens + sum(usage.values()), read + usage["cache_read_input_tokens"]
        cost += cost_usd(body["model"], Usage(usage["input_tokens"], 0, usage["cache_read_input_tokens"],
                                              usage["cache_creation_input_tokens"]))
    return tokens, read, cost


def _blocks(content: str | list[dict]) -> list[dict]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _unmarked(block: dict) -> dict:
    return {k: v for k, v in block.items() if k != "cache_control"}


def uncached(body: dict) -> dict:
    """The request without a breakpoint: nothing written, nothing read."""
    return {**body, "tools": [_unmarked(t) for t in body["tools"]], "system": [_unmarked(b) for b in body["system"]],
            "messages": [{**m, "content": [_unmarked(b) for b in _blocks(m["content"])]} for m in body["messages"]]}


def _marked(blocks: list[dict]) -> list[dict]:
    return [*blocks[:-1], {**blocks[-1], "cache_control": CACHE}] if blocks else blocks


def team_tools() -> dict[str, list[dict]]:
    """Every job's output tool (agents.roles, the assistant's), grouped by the model its role runs on."""
    from django.conf import settings

    from agents import roles
    from agents.llm.structured import tool_for
    from agents.roles import assistant

    by_model: dict[str, dict] = {}
    for agent in {a for module in (roles, assistant) for a in vars(module).values() if isinstance(a, roles.Agent)}:
        model = settings.AITEAM_MODELS[settings.AITEAM_ROLE_MODELS.get(agent.role, "strong")]
        spec = tool_for(agent.output)
        by_model.setdefault(model, {})[spec.name] = {"name": spec.name, "description": spec.description,
                                                      "input_schema": spec.input_schema}
    return {model: [tools[name] for name in sorted(tools)] for model, tools in by_model.items()}


def stable_fields(block: dict) -> list[str]:
    """A marked stable frame's fields, each as a JSON object of its own."""
    from agents.llm.anthropic_provider import FRAME

    text = block["text"]
    tag = FRAME.search(text).group(1)
    data = json.loads(text.split(f"<{tag}>\n", 1)[1].rsplit(f"\n</{tag}>", 1)[0])
    return [json.dumps({name: value}, indent=2, ensure_ascii=False) for name, value in data.items()]


def one_prefix(bodies: list[dict]) -> list[dict]:
    """The requests laid out to share one prefix across roles: the model's team tools (tool_choice any, since a
    different tool_choice would miss the cached messages), the data rule as the shared system prompt, then the
    requirement's context (every stable field any role has sent so far, once each, in the order first sent), then
    the role's prompt and the rest of its data."""
    from agents.prompts import DATA_RULE

    tools, fields, laid_out = team_tools(), [], []
    for body in bodies:
        first, *later = body["messages"]
        blocks = _blocks(first["content"])
        fields += [f for b in blocks if "cache_control" in b for f in stable_fields(b) if f not in fields]
        role_prompt = "".join(b["text"] for b in body["system"]).removesuffix(DATA_RULE)
        context = _marked([{"type": "text", "text": field} for field in fields])
        own = [{"type": "text", "text": role_prompt}, *(b for b in blocks if "cache_control" not in b)]
        laid_out.append({"model": body["model"], "tools": _marked(tools[body["model"]]),
                         "tool_choice": {"type": "any"}, "system": [{"type": "text", "text": DATA_RULE,
                                                                     "cache_control": CACHE}],
                         "messages": [{**first, "content": [*context, *own]}, *later]})
    return laid_out


def compare(bodies: list[dict]) -> None:
    print(f"\n{'the same requests laid out':<34}{'input':>8}{'read':>8}{'read share':>12}{'input USD':>12}")
    for name, laid_out in (("as sent", bodies), ("without caching", [uncached(b) for b in bodies]),
                           ("one prefix across roles", one_prefix(bodies))):
        tokens, read, cost = priced(laid_out)
        print(f"{name:<34}{tokens:>8}{read:>8}{read / tokens if tokens else 0:>12.1%}{cost:>12.6f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--no-minimum", action="store_true", help="cache every breakpoint, however short")
    args = parser.parse_args()
    from tests.fakes import prompt_cache
    from tests.fakes.anthropic_server import FakeAnthropicServer

    if args.no_minimum:
        prompt_cache.MIN_CACHEABLE.update(dict.fromkeys(prompt_cache.MIN_CACHEABLE, 1))
    with tempfile.TemporaryDirectory(prefix="aiteam-bench-cache-") as var, FakeAnthropicServer() as fake:
        configure(Path(var), fake.url)
        from django.conf import settings
        from django.core.management import call_command

        respond, answered = cassette_responder(settings.AITEAM_REPLAY_CASSETTE), []

        def keeping(body: dict) -> tuple[str | None, dict]:
            reply = respond(body)
            answered.append(body)  # a request the cassette has no answer for is priced nowhere
            return reply

        fake.respond_with(keeping)
        out = StringIO()
        call_command("aiteam_demo", approve_deployment=True, stdout=out)
        state = next((line for line in out.getvalue().splitlines() if line.startswith("state: ")), "state: ?")
        print(f"sample brief, {state}; models {settings.AITEAM_MODELS}; "
              f"minimum {'none' if args.no_minimum else 'as documented'}")
        report(shares())
        compare(answered)


if __name__ == "__main__":
    main()
