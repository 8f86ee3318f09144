"""docs/role-schemas.md is what docs/role_schemas.py writes from the roles' pydantic models: a new role, field or
limit makes this fail until the script is re-run (python docs/role_schemas.py)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import agents.roles as roles
from agents.llm.structured import tool_for
from agents.roles.base import Agent

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("role_schemas", ROOT / "docs" / "role_schemas.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_what_the_script_writes_today():
    page = (ROOT / "docs" / "role-schemas.md").read_text(encoding="utf-8")

    assert page == _script().render(), "docs/role-schemas.md is stale: run python docs/role_schemas.py"


def test_every_agent_is_documented_with_its_tool_and_every_field():
    text = _script().render()
    agents = {name: value for name, value in vars(roles).items() if isinstance(value, Agent)}

    for name, agent in agents.items():
        assert f"\n## {name}\n" in text and f"`{tool_for(agent.output).name}`" in text
        section = text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for field in agent.output.model_fields:
            assert f"| `{field}` |" in section, (name, field)


def test_an_answer_model_no_agent_uses_yet_is_listed_apart():
    script = _script()
    from agents.schemas.edits import EditsOutput
    from agents.schemas.triage import TriageOutput

    unbound = script.unbound_outputs({TriageOutput})

    assert EditsOutput in unbound and TriageOutput not in unbound
