"""Prompts are files under agents/prompts/; this module is the one way to read them."""
from functools import cache
from pathlib import Path

PROMPT_DIR = Path(__file__).parent / "prompts"


@cache
def load_prompt(name: str) -> str:
    return (PROMPT_DIR / f"{name}.md").read_text(encoding="utf-8")
