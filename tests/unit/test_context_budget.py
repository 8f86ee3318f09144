"""Each role's context on an existing repository holds a hard token budget, however large the repository
(docs/adr/0035): the map, the search hits and the files' text are cut to fit, per role and per project."""
import pytest

from agents.repo.budget import DEFAULT_CONTEXT_TOKENS, context_budget, estimate_tokens, json_tokens
from agents.repo.excerpts import excerpt
from lifecycle import contexts, step_keys
from lifecycle.repo_contexts import Wanted, file_views
from lifecycle.services.artifacts import artifact_store
from lifecycle.services.intake import requirement_submit
from lifecycle.services.scheduling import step_schedule
from tests.flows import fresh
from tests.repo_history import COMMITS
from tests.repo_steps import LOCALIZED, PO_TICKET, TICKET, HeldSteps, branch_from_repository, repository_project

MODULES, HELPERS, FINDERS = 400, 25, 2000


def module(i: int) -> bytes:
    other = (i + 1) % MODULES
    lines = [f'"""Ledger {i}."""', f"from shop.gen.mod_{other:03} import helper_{other}_0", ""]
    for j in range(HELPERS):
        lines += [f"def helper_{i}_{j}(value, factor={j}):", f'    """Scale a value for ledger {i}."""',
                  f"    return helper_{other}_0(value) * factor + {j}", ""]
    return "\n".join(lines).encode()


CATALOG = "".join(f"def find_{k}(items):\n    return [i for i in items if i == {k}]\n\n\n" for k in range(FINDERS))
BIG = [*COMMITS, ("Grow", {**{f"src/shop/gen/mod_{i:03}.py": module(i) for i in range(MODULES)},
                           "src/shop/gen/__init__.py": b"", "src/shop/catalog.py": CATALOG.encode()})]
LOCALIZED_BIG = {"reasoning": "the finder lives in the catalogue", "files": [
    {"path": "src/shop/catalog.py", "action": "change", "symbols": ["find_1500"], "reason": "find_1500 filters"},
    *LOCALIZED["files"]]}
PLAN_BIG = {
    "reasoning": "One finder and its test.", "interfaces": [{"name": "find_1500", "signature": "find_1500(items)"}],
    "tech_stack": ["Python 3.11"],
    "tasks": [{"key": "T1", "title": "Fix the finder", "story_refs": [1], "files": ["src/shop/catalog.py",
               "tests/test_catalog.py"], "depends_on": [], "definition_of_done": "the finder's test passes"}],
}


@pytest.fixture
def big(alice, acme_project, tmp_path, monkeypatch, scripted):
    """A clarified ticket on a repository of 400 modules and a 2,000-function file; the localization is next."""
    repository_project(acme_project, tmp_path, commits=BIG)
    steps = HeldSteps(monkeypatch)
    req = requirement_submit(user=alice, brief=TICKET, title="Missing prices", playbook="bug_fix")
    branch_from_repository(fresh(req))
    scripted.enqueue(PO_TICKET)
    steps.run("po_clarify")
    return fresh(req), steps


def shows(excerpts, line: str) -> bool:
    """Whether an excerpt holds `line` at the number CATALOG gives it."""
    numbered = {e.start_line + i: text for e in excerpts for i, text in enumerate(e.text.splitlines())}
    return any(text == line == CATALOG.splitlines()[number - 1] for number, text in numbered.items())


def lines_of(view) -> str:
    """What context_sources says of an excerpt."""
    spans = ", ".join(f"{e.start_line}-{e.start_line + e.text.count(chr(10)) - 1}" for e in view.excerpts)
    return f"; lines {spans} of {view.total_lines}"


def set_budgets(project, **tokens) -> None:
    project.settings = {**(project.settings or {}), "context_tokens": tokens}
    project.save(update_fields=["settings"])


@pytest.mark.django_db(transaction=True)
def test_the_localizers_context_holds_its_budget_on_a_large_repository(big, scripted, acme_project):
    req, steps = big
    context = contexts.localize_context(req.pk)
    assert json_tokens(context.model_dump(mode="json")) <= DEFAULT_CONTEXT_TOKENS["tech_lead"]
    assert "src/shop/cart.py" in context.repository_map  # the file the ticket names is ranked first
    assert context.search_hits and "the repository has 409 files, 408 indexed, 1 left out: 1 binary" in context.map_note
    shown, ranked = context.map_note.split(" ranked")[0].split(" of ")
    assert 0 < int(shown) < int(ranked)  # cut to fit, not all
    set_budgets(acme_project, tech_lead=1500)
    small = contexts.localize_context(req.pk)
    assert json_tokens(small.model_dump(mode="json")) <= 1500 and small.repository_map
    scripted.enqueue(LOCALIZED)
    steps.run("tl_localize")
    (request,) = scripted.requests[1:]
    framing = 200  # the task line and the data element's tags around the context's JSON
    assert estimate_tokens(request.messages[0]["content"]) <= 1500 + framing
    (call,) = req.llm_calls.filter(step__key="tl_localize")
    assert {s["path"] for s in call.context_sources} <= set(context.known_paths)
    assert len(call.context_sources) == len({(s["path"], s.get("symbol"), s["why"]) for s in call.context_sources})


@pytest.mark.django_db(transaction=True)
def test_a_file_too_large_for_the_engineers_budget_is_shown_by_its_localized_definitions(big, scripted, acme_project):
    req, steps = big
    scripted.enqueue(LOCALIZED_BIG).enqueue(PLAN_BIG)
    steps.run("tl_localize")
    steps.run("tl_plan")
    plan = contexts.plan_context(req.pk)
    assert json_tokens(plan.model_dump(mode="json")) <= DEFAULT_CONTEXT_TOKENS["tech_lead"]
    for budget in (DEFAULT_CONTEXT_TOKENS["senior_engineer"], 2000):
        set_budgets(acme_project, senior_engineer=budget)
        context = contexts.engineer_context(req.pk, "T1", 1)
        assert json_tokens(context.model_dump(mode="json")) <= budget
        catalog = next(f for f in context.files if f.path == "src/shop/catalog.py")
        assert not catalog.whole and catalog.total_lines == CATALOG.count("\n")
        assert shows(catalog.excerpts, "def find_1500(items):")
    test_file = next(f for f in context.files if f.path == "tests/test_catalog.py")
    assert not test_file.exists  # a new file the plan names: no text yet


@pytest.mark.django_db(transaction=True)
def test_the_reviewer_sees_the_diff_and_the_files_that_fit_within_its_budget(big, scripted, acme_project):
    req, steps = big
    edits = {"reasoning": "compare by value", "edits": [{
        "path": "src/shop/catalog.py", "search": "def find_1500(items):\n    return [i for i in items if i == 1500]\n",
        "replace": "def find_1500(items):\n    return [i for i in items if i == 1500.0]\n"}],
        "files": [{"path": "tests/test_catalog.py", "content": "from shop.catalog import find_1500\n\n\n"
                   "def test_find():\n    assert find_1500([1500]) == [1500]\n"}]}
    scripted.enqueue(LOCALIZED_BIG).enqueue(PLAN_BIG).enqueue(edits)
    for kind in ("tl_localize", "tl_plan", "engineer"):
        assert steps.run(kind).state == "done"
    for budget in (DEFAULT_CONTEXT_TOKENS["tech_lead"], 1000):
        set_budgets(acme_project, tech_lead=budget)
        context = contexts.code_review_context(req.pk, 1)
        assert json_tokens(context.model_dump(mode="json")) <= budget
        assert "+    return [i for i in items if i == 1500.0]" in context.diff
        assert context.not_shown == ["src/shop/catalog.py"]  # 2,000 functions: the diff shows what changed
    assert [f.path for f in context.files] == ["tests/test_catalog.py"]
    assert {s.path for s in context.sources} == {"src/shop/catalog.py", "tests/test_catalog.py"}


FIND_EDITS = {"reasoning": "compare by value", "edits": [{
    "path": "src/shop/catalog.py", "search": "def find_1500(items):\n    return [i for i in items if i == 1500]\n",
    "replace": "def find_1500(items):\n    return [i for i in items if i == 1500.0]\n"}],
    "files": [{"path": "tests/test_catalog.py", "content": "from shop.catalog import find_1500\n\n\n"
               "def test_find():\n    assert find_1500([1500]) == [1500]\n"}]}
BASE_OUTCOMES = {"tests/test_cart.py::test_total": "passed", "tests/test_cart.py::test_none": "failed",
                 "tests/test_cart.py::test_coin": "passed"}
QC_TESTS = {"reasoning": "the finder, from the ticket", "files": [{
    "path": "tests/acceptance/test_finder.py", "content": "from shop.catalog import find_1500\n\n\n"
    "def test_finds_by_value():\n    assert find_1500([1500.0]) == [1500.0]\n"}],
    "coverage": {"AC-1": ["test_finds_by_value"], "AC-2": ["test_finds_by_value"]}}


def baseline_recorded(req) -> None:
    """What repo_prepare stores (lifecycle/services/preparation.py), for a requirement these tests branched by hand."""
    artifact_store(req, kind="baseline", name="baseline", content={
        "ok": True, "base_sha": req.base_sha, "branch": "aiteam/x", "counts": {"passed": 2, "failed": 1, "errors": 0,
                                                                               "skipped": 0},
        "test_command": {"shown": "pytest tests", "source": "pyproject.toml"}, "flaky": ["tests/test_cart.py::test_coin"],
        "baseline": {"outcomes": BASE_OUTCOMES, "flaky": ["tests/test_cart.py::test_coin"],
                     "passing": ["tests/test_cart.py::test_total"]}})


@pytest.mark.django_db(transaction=True)
def test_qcs_context_holds_its_budget_though_the_changed_file_is_far_larger(big, scripted, acme_project):
    req, steps = big
    scripted.enqueue(LOCALIZED_BIG).enqueue(PLAN_BIG).enqueue(FIND_EDITS)
    for kind in ("tl_localize", "tl_plan", "engineer"):
        assert steps.run(kind).state == "done"
    baseline_recorded(req)
    assert json_tokens(CATALOG) > 4 * DEFAULT_CONTEXT_TOKENS["qc_engineer"]
    for budget in (DEFAULT_CONTEXT_TOKENS["qc_engineer"], 1500):
        set_budgets(acme_project, qc_engineer=budget)
        context = contexts.qc_context(req.pk)
        assert json_tokens(context.model_dump(mode="json")) <= budget
        assert [f.path for f in context.files] == ["src/shop/catalog.py", "src/shop/cart.py", "src/shop/discount.py"
                                                   ][:len(context.files)]
        catalog = context.files[0]
        assert not catalog.whole and shows(catalog.excerpts, "def find_1500(items):")
    assert context.modules == ["src/shop/catalog.py"] and context.reproduce  # the engineer's test is not QC's to see
    assert "tests/test_catalog.py" not in {s.path for s in context.sources} | set(context.not_shown)
    assert context.baseline.failing == ["tests/test_cart.py::test_none"] and context.baseline.counts["passed"] == 2
    assert context.ticket.acceptance_criteria == PO_TICKET["acceptance_criteria"]
    step_schedule(requirement_id=req.pk, key=step_keys.QC_TESTS, attempt=1)
    scripted.enqueue(QC_TESTS)
    assert steps.run("qc_tests").state == "done"
    (call,) = req.llm_calls.filter(step__key="qc_tests")
    assert call.context_sources[0] == {"path": "src/shop/catalog.py", "symbol": "find_1500",
                                       "why": "changed by this requirement; find_1500 filters" + lines_of(catalog)}
    shown = scripted.requests[-1].messages[0]["content"]
    assert "def find_1500(items):" in shown and "tests/test_cart.py::test_none" in shown and "workspace" not in shown


def test_a_budget_is_the_projects_setting_for_the_role_or_the_default():
    assert context_budget("tech_lead", None) == DEFAULT_CONTEXT_TOKENS["tech_lead"]
    assert context_budget("tech_lead", {"tech_lead": 9000, "senior_engineer": 700}) == 9000
    assert context_budget("product_owner", {}) > 0
    for bad, said in (({"tech_lead": "lots"}, "whole number"), ({"tech_lead": 10}, "at least"),
                      ({"tech_lead": True}, "whole number"), ([6000], "mapping")):
        with pytest.raises(ValueError, match=said) as refused:
            context_budget("tech_lead", bad)
        assert "context_tokens" in str(refused.value)


def test_an_excerpt_is_the_whole_file_when_it_fits_and_whole_lines_when_it_does_not():
    assert [(c.start_line, c.text) for c in excerpt("a.py", "x = 1\n", 100)] == [(1, "x = 1\n")]
    chunks = excerpt("catalog.py", CATALOG, 300, symbols=["find_7", "find_1999"])
    assert sum(json_tokens(c.text) for c in chunks) <= 300
    assert [c.start_line for c in chunks][:1] == [1] and all(c.text.endswith("\n") for c in chunks)
    lines = CATALOG.splitlines(keepends=True)
    for chunk in chunks:
        assert "".join(lines[chunk.start_line - 1: chunk.start_line - 1 + chunk.text.count("\n")]) == chunk.text
    assert shows(chunks, "def find_1999(items):")


def test_one_file_larger_than_the_whole_budget_is_still_shown_in_part(tmp_path):
    (tmp_path / "catalog.py").write_text(CATALOG)
    for budget in (300, 1000, 5000):
        (view,), not_shown = file_views(tmp_path, [Wanted("catalog.py", "planned", ("find_1999",))], budget)
        assert not_shown == [] and not view.whole and view.excerpts
        assert json_tokens(view.model_dump(mode="json")) <= budget
        assert shows(view.excerpts, "def find_1999(items):")
