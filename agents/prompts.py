"""Prompts are files under agents/prompts/; this module is the one way to read them.

A requirement runs with a bundle of all prompts (project overrides applied) taken when it
starts and identified by its content hash, so editing a file never changes a running requirement.
"""
import hashlib
import json
from functools import cache
from pathlib import Path

PROMPT_DIR = Path(__file__).parent / "prompts"


@cache
def load_prompt(name: str) -> str:
    return (PROMPT_DIR / f"{name}.md").read_text(encoding="utf-8")


def prompt_files() -> dict[str, str]:
    """Every prompt as it is on disk now, by name."""
    return {path.stem: path.read_text(encoding="utf-8") for path in sorted(PROMPT_DIR.glob("*.md"))}


def bundle_hash(prompts: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(prompts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
