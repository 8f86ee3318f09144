"""Prompts are files under agents/prompts/; this module is the one way to read them.

A requirement runs with a bundle of all prompts (project overrides applied) taken when it
starts and identified by its content hash, so editing a file never changes a running requirement.
"""
import hashlib
import json
from functools import cache, lru_cache
from pathlib import Path

PROMPT_DIR = Path(__file__).parent / "prompts"


@cache
def load_prompt(name: str) -> str:
    return (PROMPT_DIR / f"{name}.md").read_text(encoding="utf-8")


def prompt_files() -> dict[str, str]:
    """Every prompt as it is on disk now, by name (re-read only when a file's size or mtime changed)."""
    paths = sorted(PROMPT_DIR.glob("*.md"))
    return dict(_read_prompts(tuple((path, path.stat().st_mtime_ns, path.stat().st_size) for path in paths)))


@lru_cache(maxsize=4)
def _read_prompts(stamps: tuple) -> tuple[tuple[str, str], ...]:
    return tuple((path.stem, path.read_text(encoding="utf-8")) for path, _, _ in stamps)


def bundle_hash(prompts: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(prompts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
