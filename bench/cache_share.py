"""The share of input tokens read from the prompt cache over a run of the sample brief (ADR 38).

The sample brief runs through the real pipeline (`aiteam_demo --approve-deployment`: every step, the real runner,
eager Celery on a scratch SQLite database) with the Anthropic provider pointed (ANTHROPIC_BASE_URL, as the tests
do) at the fake Messages API of tests/fakes. The fake answers each request with the sample cassette's answer for
it and reports usage as the API would: cache reads and writes by prefix up to each breakpoint, with each model's
minimum (tests/fakes/prompt_cache.py; tokens estimated as bytes / 4). The figures are the LLMCall rows the run
recorded: per role and in total, input tokens read from cache / all input tokens (read + written + uncached).

    python bench/cache_share.py               # the API's minimums
    python bench/cache_share.py --no-minimum  # every breakpoint cached: what the layout could share at best
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


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


def shares() -> list[tuple[str, int, int, int, int]]:
    """(role, calls, read, written, uncached) per role, in the order the roles first called."""
    from lifecycle.models import LLMCall

    rows: dict[str, list[int]] = {}
    for call in LLMCall.objects.order_by("id"):
        row = rows.setdefault(call.role, [0, 0, 0, 0])
        for i, n in enumerate((1, call.cache_read_tokens, call.cache_creation_tokens, call.input_tokens)):
            row[i] += n
    return [(role, *row) for role, row in rows.items()]


def report(rows: list[tuple[str, int, int, int, int]]) -> None:
    print(f"{'role':<18}{'calls':>6}{'read':>9}{'written':>9}{'uncached':>10}{'read share':>12}")
    for role, calls, read, written, uncached in [*rows, ("total", *(sum(c) for c in list(zip(*rows, strict=True))[1:]))]:
        total = read + written + uncached
        print(f"{role:<18}{calls:>6}{read:>9}{written:>9}{uncached:>10}{read / total if total else 0:>12.1%}")


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

        fake.respond_with(cassette_responder(settings.AITEAM_REPLAY_CASSETTE))
        out = StringIO()
        call_command("aiteam_demo", approve_deployment=True, stdout=out)
        state = next((line for line in out.getvalue().splitlines() if line.startswith("state: ")), "state: ?")
        print(f"sample brief, {state}; models {settings.AITEAM_MODELS}; "
              f"minimum {'none' if args.no_minimum else 'as documented'}")
        report(shares())


if __name__ == "__main__":
    main()
