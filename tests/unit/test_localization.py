"""The Tech Lead localizes a ticket on an existing repository (docs/adr/0035): from the ranked map and the search
hits, within the role's token budget, with a wrong path sent back to the model, what went in recorded on the
LLMCall, and the plan made from the localization with the files' current text."""
import json
import os

import pytest

from agents.llm.factory import llm_from_settings
from agents.llm.scripted import ScriptedProvider
from agents.prompts import load_prompt
from agents.repo.budget import json_tokens
from agents.roles import PLAN_JOBS
from agents.schemas import LocatedFile, RepoPlanContext, RepoTicketPlanContext, Ticket
from lifecycle import contexts, guards
from lifecycle.models import Requirement
from lifecycle.services.artifacts import content_json, latest
from tests.flows import fresh
from tests.repo_history import COMMITS
from tests.repo_steps import (
    LOCALIZED,
    PLAN,
    PO_TICKET,
    TICKET,
    HeldSteps,
    branch_from_repository,
    repair_text,
    repository_project,
    ticket_on_repository,
)

WRONG_PATH = {**LOCALIZED, "files": [{**LOCALIZED["files"][0], "path": "src/shop/carts.py"}, *LOCALIZED["files"][1:]]}
WRONG_SYMBOL = {**LOCALIZED, "files": [{**LOCALIZED["files"][0], "symbols": ["Cart.total"]}, *LOCALIZED["files"][1:]]}


@pytest.fixture
def steps(monkeypatch):
    return HeldSteps(monkeypatch)


@pytest.fixture
def clarified(alice, acme_project, tmp_path, steps, scripted):
    """A bug ticket on the shop repository, branched from main and clarified: the localization is next."""
    req = ticket_on_repository(acme_project, alice, tmp_path)
    scripted.enqueue(PO_TICKET)
    steps.run("po_clarify")
    assert steps.kinds()[-1:] == ["tl_localize"]
    scripted.requests.clear()  # the Product Owner's
    return fresh(req)


@pytest.mark.django_db(transaction=True)
def test_localization_is_stored_and_the_plan_is_scheduled(clarified, steps, scripted):
    scripted.enqueue(LOCALIZED)
    assert steps.run("tl_localize").state == "done"
    stored = latest(clarified, "localization", "localization")
    assert [f["path"] for f in content_json(stored)["files"]] == [f["path"] for f in LOCALIZED["files"]]
    assert stored.metadata["commit"] == fresh(clarified).base_sha
    (event,) = clarified.events.filter(name="CodeLocalized")
    assert event.payload["files"][0] == {"path": "src/shop/cart.py", "action": "change", "symbols": ["total"]}
    assert steps.kinds()[-1:] == ["tl_plan"]
    (request,) = scripted.requests
    shown = request.messages[0]["content"]
    assert "def total(prices):" in shown and "src/shop/cart.py" in shown  # the map, ranked towards the ticket
    assert "known_paths" not in shown and "workspace" not in shown  # what checks the answer is never shown


@pytest.mark.django_db(transaction=True)
def test_a_path_not_in_the_repository_goes_back_with_the_nearest_one(clarified, steps, scripted):
    scripted.enqueue(WRONG_PATH).enqueue(WRONG_SYMBOL).enqueue(LOCALIZED)
    assert steps.run("tl_localize").state == "done"
    first, second = (repair_text(r) for r in scripted.requests[1:])
    assert "src/shop/carts.py is not a file of the repository (did you mean src/shop/cart.py," in first
    assert "src/shop/cart.py defines no Cart.total; its definitions are total" in second
    assert content_json(latest(clarified, "localization"))["files"][0]["path"] == "src/shop/cart.py"


@pytest.mark.django_db(transaction=True)
def test_a_new_file_may_be_named_but_not_one_that_exists(clarified, steps, scripted):
    exists = {**LOCALIZED, "files": [*LOCALIZED["files"], {"path": "src/shop/cart.py", "action": "new", "reason": "x"}]}
    exists["files"] = exists["files"][1:]
    new = {**LOCALIZED, "files": [*LOCALIZED["files"], {"path": "tests/test_missing.py", "action": "new",
                                                         "reason": "the regression test"}]}
    scripted.enqueue(exists).enqueue(new)
    assert steps.run("tl_localize").state == "done"
    assert "src/shop/cart.py already exists: mark it change or read" in repair_text(scripted.requests[1])
    assert content_json(latest(clarified, "localization"))["files"][-1]["path"] == "tests/test_missing.py"


@pytest.mark.django_db(transaction=True)
def test_the_playbook_is_fixed_once_the_localization_is_scheduled(clarified):
    assert clarified.steps.filter(key="tl_localize", state="queued").exists()
    assert not guards.playbook_still_open(clarified)  # localizing is the plan's first step


@pytest.mark.django_db(transaction=True)
def test_the_llm_call_records_what_went_in_and_why(clarified, steps, scripted):
    scripted.enqueue(LOCALIZED)
    steps.run("tl_localize")
    (call,) = clarified.llm_calls.filter(step__key="tl_localize")
    assert call.context_sources, "the localizer's sources are recorded"
    total = next(s for s in call.context_sources if s.get("symbol") == "total" and s["why"].startswith("repository"))
    assert total["path"] == "src/shop/cart.py" and "named in the ticket" in total["why"]
    hits = [s for s in call.context_sources if s["why"].startswith("search hit")]
    assert any(s["path"] == "src/shop/cart.py" for s in hits)
    assert {tuple(sorted(s)) for s in call.context_sources} <= {("path", "symbol", "why"), ("path", "why")}


@pytest.mark.django_db(transaction=True)
def test_the_plan_sees_the_localization_with_the_files_text(clarified, steps, scripted):
    scripted.enqueue(LOCALIZED).enqueue(PLAN)
    steps.run("tl_localize")
    assert steps.run("tl_plan").state == "done"
    plan_request = scripted.requests[-1]
    data = json.dumps(plan_request.messages[0]["content"])
    assert "localized (change): total sums the prices" in data and "return round(sum(prices), 2)" in data
    assert "Missing prices" in data or "missing" in data.lower()
    (call,) = clarified.llm_calls.filter(step__key="tl_plan")
    assert {s["path"] for s in call.context_sources} == {f["path"] for f in LOCALIZED["files"]}
    assert fresh(clarified).state == "in_development" and steps.kinds()[-1:] == ["engineer"]
    context = contexts.plan_context(clarified.pk)
    assert json_tokens(context.model_dump(mode="json")) <= 6000


def test_the_plan_contexts_on_a_repository_are_taken_by_the_same_planners():
    located = [LocatedFile(**LOCALIZED["files"][0])]
    ticket = RepoTicketPlanContext(ticket=Ticket(summary="s", acceptance_criteria=["a", "b"]), localization=located)
    spec = RepoPlanContext(summary="s", components=[], interfaces=[], data_models=[], stories=["1. A", "2. B"],
                           localization=located)
    story_plan = {**PLAN, "tasks": [{**PLAN["tasks"][0], "story_refs": [1]}]}
    provider = ScriptedProvider().enqueue(PLAN).enqueue({"reasoning": "r", "tasks": story_plan["tasks"]})
    llm = llm_from_settings(provider)
    assert PLAN_JOBS.run(ticket, llm).tasks[0].files == PLAN["tasks"][0]["files"]
    assert PLAN_JOBS.run(spec, llm).tasks[0].story_refs == [1]
    ticket_request, spec_request = provider.requests
    assert ticket_request.system.startswith(load_prompt("tech_lead_plan_ticket").strip())
    assert spec_request.system.startswith(load_prompt("tech_lead_plan").strip())
    assert "total sums the prices" in spec_request.messages[0]["content"]


@pytest.mark.django_db(transaction=True)
def test_a_file_name_that_cannot_travel_as_text_is_left_out_and_said_so_never_failing_the_step(
        alice, acme_project, tmp_path, steps, scripted):
    from lifecycle.services.intake import requirement_submit

    odd = {os.fsdecode(b"src/shop/caf\xe9.py"): b"def cafe_total(prices):\n    return 0\n", "notes\nforged.txt": b"x\n"}
    repository_project(acme_project, tmp_path, commits=[*COMMITS, ("Odd names", odd)])
    req = requirement_submit(user=alice, brief=TICKET, title="Missing prices", playbook="bug_fix")
    branch_from_repository(Requirement.objects.get(pk=req.pk))
    scripted.enqueue(PO_TICKET).enqueue(LOCALIZED)
    steps.run("po_clarify")
    assert steps.run("tl_localize").state == "done"  # it failed every time: '\\udce9' ... surrogates not allowed
    request = scripted.requests[-1]
    shown = request.messages[0]["content"]
    assert shown.encode("utf-8") and "caf" not in shown and "forged" not in shown
    assert "3 left out: 1 binary, 1 name not UTF-8, 1 name with a control character" in shown  # the map's note
    (call,) = fresh(req).llm_calls.filter(step__key="tl_localize")
    assert all(source["path"].encode("utf-8") for source in call.context_sources)
