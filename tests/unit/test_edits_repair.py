"""A block that does not apply goes back to the model through the real provider loop (the engineer's output is
validated against the files of its workspace), and the repaired answer is the one used and applied."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import PrivateAttr

from agents.edits import Files, apply_edits, read_files
from agents.llm.base import LLMOutputStillInvalid
from agents.llm.factory import llm_from_settings
from agents.llm.scripted import ScriptedProvider
from agents.roles import Agent
from agents.schemas.base import Strict
from agents.schemas.edits import EditsOutput

MODULE = """import os


def load(path):
    if not path:
        raise ValueError(path)
    with open(path) as f:
        return f.read()


def size(path):
    if not path:
        raise ValueError(path)
    return os.path.getsize(path)
"""
GUARD = "    if not path:\n        raise ValueError(path)\n"
AMBIGUOUS = {"reasoning": "an empty path is a bad request", "edits": [
    {"path": "store/files.py", "search": GUARD, "replace": "    if not path:\n        raise FileNotFoundError(path)\n"}]}
REPAIRED = {"reasoning": "only size() should say the file is missing", "edits": [
    {"path": "store/files.py", "search": "def size(path):\n" + GUARD,
     "replace": "def size(path):\n    if not path:\n        raise FileNotFoundError(path)\n"}]}
PROMPT = "You change an existing repository with search/replace blocks. Answer only by calling the tool."


class TicketEditContext(Strict):
    """A role's context as the lifecycle side would build it: what the model reads, plus the workspace it edits
    (private: never in the prompt)."""

    ticket: str
    excerpts: list[str] = []
    _root: Path = PrivateAttr()

    def current_files(self, paths: Sequence[str]) -> Files:
        return read_files(self._root, paths)


ENGINEER = Agent(role="senior_engineer", output=EditsOutput, task="Fix the ticket with search/replace blocks.",
                 prompt="senior_engineer_edit")


@pytest.fixture
def context(tmp_path: Path) -> TicketEditContext:
    (tmp_path / "store").mkdir()
    (tmp_path / "store/files.py").write_text(MODULE)
    context = TicketEditContext(ticket="size('') should raise FileNotFoundError", excerpts=[MODULE])
    context._root = tmp_path
    return context


def run(context: TicketEditContext, *answers: dict) -> tuple[EditsOutput, ScriptedProvider]:
    provider = ScriptedProvider()
    for item in answers:
        provider.enqueue(item)
    return ENGINEER.run(context, llm_from_settings(provider, prompts={"senior_engineer_edit": PROMPT})), provider


def repair_text(provider: ScriptedProvider) -> str:
    (result,) = provider.requests[-1].messages[-1]["content"]
    assert result["type"] == "tool_result" and result["is_error"]
    return result["content"]


def test_an_ambiguous_block_is_repaired_and_the_repaired_answer_applies(context):
    output, provider = run(context, AMBIGUOUS, REPAIRED)
    assert output == EditsOutput.model_validate(REPAIRED) and len(provider.requests) == 2
    repair = repair_text(provider)
    assert json.dumps("block 1 (store/files.py): the search text matches 2 places, at lines 5, 12")[1:-1] in repair
    assert provider.requests[1].messages[-2]["content"][0]["input"] == AMBIGUOUS  # the refused answer, echoed
    applied = apply_edits(context.current_files(["store/files.py"]), output)
    fixed = MODULE.replace("size(path):\n" + GUARD, "size(path):\n    if not path:\n        raise FileNotFoundError(path)\n")
    assert applied.changed["store/files.py"].decode() == fixed


def test_a_block_that_matches_nothing_is_repaired_with_the_nearest_lines(context):
    stale = {**REPAIRED, "edits": [{**REPAIRED["edits"][0], "search": "def size(path):\n    if path is None:\n"}]}
    output, provider = run(context, stale, REPAIRED)
    assert output == EditsOutput.model_validate(REPAIRED)
    repair = repair_text(provider)
    assert json.dumps("The nearest lines are 11-12")[1:-1] in repair
    assert json.dumps("   11| def size(path):\n   12|     if not path:")[1:-1] in repair


def test_a_block_that_breaks_the_syntax_is_repaired_with_the_line(context):
    broken = {**REPAIRED, "edits": [{**REPAIRED["edits"][0], "replace": "def size(path:\n"}]}
    _, provider = run(context, broken, REPAIRED)
    assert json.dumps("store/files.py does not parse after the edits: line 11")[1:-1] in repair_text(provider)


def test_an_answer_still_refused_after_the_repairs_fails_with_the_last_reason(context):
    with pytest.raises(LLMOutputStillInvalid) as failed:
        run(context, AMBIGUOUS, AMBIGUOUS, AMBIGUOUS)
    (error,) = failed.value.errors
    assert failed.value.repairs == 2 and "matches 2 places, at lines 5, 12" in error["msg"]


def test_a_context_that_cannot_show_the_files_checks_the_answer_by_shape_only():
    class Blind(Strict):
        ticket: str

    provider = ScriptedProvider().enqueue(AMBIGUOUS)
    output = ENGINEER.run(Blind(ticket="t"), llm_from_settings(provider, prompts={"senior_engineer_edit": PROMPT}))
    assert output == EditsOutput.model_validate(AMBIGUOUS) and len(provider.requests) == 1


def test_the_workspace_stays_out_of_the_prompt(context):
    _, provider = run(context, REPAIRED)
    sent = json.dumps(provider.requests[0].messages)
    assert str(context._root) not in sent and "size('') should raise FileNotFoundError" in sent
