"""The engineer on an existing repository (docs/adr/0035): search/replace edits checked against the files as they
stand (a block that matches nothing goes back naming the nearest lines), applied all or none and committed on the
requirement's branch, whose history is the base's; a task still writes only its planned files."""
import pytest

from agents.prompts import load_prompt
from lifecycle import step_keys
from lifecycle.services.artifacts import artifact_store
from lifecycle.services.development import workspace_for
from lifecycle.services.scheduling import step_schedule
from tests.flows import fresh
from tests.repo_history import git
from tests.repo_steps import (
    EDITS,
    LOCALIZED,
    PLAN,
    PO_TICKET,
    HeldSteps,
    repair_text,
    ticket_on_repository,
)

STALE = {"reasoning": "sum what is there", "edits": [
    {"path": "src/shop/cart.py", "search": "    return sum(prices)\n", "replace": "    return sum(p or 0 for p in prices)\n"}]}
OUTSIDE = {"reasoning": "discounts of None too", "edits": [*EDITS["edits"], {
    "path": "src/shop/discount.py", "search": "    return total * (100 - percent) // 100\n",
    "replace": "    return (total or 0) * (100 - percent) // 100\n"}]}
ASIDE = {**EDITS, "files": [{"path": "src/other/helpers.py", "content": "def zero():\n    return 0\n"}]}
BESIDE = {**EDITS, "files": [{"path": "src/shop/prices.py", "content": "def known(prices):\n    return prices\n"}]}


@pytest.fixture
def steps(monkeypatch):
    return HeldSteps(monkeypatch)


@pytest.fixture
def planned(alice, acme_project, tmp_path, steps, scripted):
    """The shop ticket localized and planned: task T1 (src/shop/cart.py and its test) is next."""
    req = ticket_on_repository(acme_project, alice, tmp_path)
    scripted.enqueue(PO_TICKET).enqueue(LOCALIZED).enqueue(PLAN)
    for kind in ("po_clarify", "tl_localize", "tl_plan"):
        steps.run(kind)
    scripted.requests.clear()
    return fresh(req)


@pytest.mark.django_db(transaction=True)
def test_edits_are_committed_on_the_branch_with_the_bases_history(planned, steps, scripted):
    scripted.enqueue(EDITS)
    assert steps.run("engineer").state == "done"
    req = fresh(planned)
    workspace = workspace_for(req)
    assert git(workspace.path, "merge-base", req.base_sha, req.workspace_head).strip() == req.base_sha
    assert [subject for _, subject in workspace.log()] == ["T1: Count missing prices as zero (attempt 1)"]
    assert git(workspace.path, "rev-parse", workspace.branch).strip() == req.workspace_head
    assert "if p is not None" in git(workspace.path, "show", f"{req.workspace_head}:src/shop/cart.py")
    stored = {a.name: a for a in req.artifacts.filter(kind__in=["source_file", "test_file"]).select_related("blob")}
    assert set(stored) == {"src/shop/cart.py", "tests/test_cart.py"}
    assert stored["tests/test_cart.py"].kind == "test_file" and "test_missing_price" in stored["tests/test_cart.py"].blob.content
    assert stored["src/shop/cart.py"].metadata == {"attempt": 1, "commit": req.workspace_head}
    (event,) = req.events.filter(name="TaskImplemented")
    assert event.payload["commit"] == req.workspace_head and steps.kinds()[-1:] == ["self_test"]
    (call,) = req.llm_calls.filter(step__key="engineer:T1")
    assert [s["path"] for s in call.context_sources][:2] == ["src/shop/cart.py", "tests/test_cart.py"]
    assert any(s["path"] == "src/shop/discount.py" and "localized (read)" in s["why"] for s in call.context_sources)


@pytest.mark.django_db(transaction=True)
def test_a_task_title_reaches_the_commit_as_one_neutral_line(alice, acme_project, tmp_path, steps, scripted):
    """The planner's task title is model output the ticket can steer: in the pushed history it must not close an
    issue, mention anyone or add a Co-authored-by trailer (which GitHub credits on the commit and the PR)."""
    title = "Fixes #3 for @acme/owners, see https://gitlab.com/acme/shop/-/issues/3\n\nCo-authored-by: M <m@x.example>\n"
    req = ticket_on_repository(acme_project, alice, tmp_path)
    plan = {**PLAN, "tasks": [{**PLAN["tasks"][0], "title": title + "x" * 80}]}
    scripted.enqueue(PO_TICKET).enqueue(LOCALIZED).enqueue(plan).enqueue(EDITS)
    for kind in ("po_clarify", "tl_localize", "tl_plan", "engineer"):
        assert steps.run(kind).state == "done", kind
    path = workspace_for(fresh(req)).path
    message = git(path, "log", "-1", "--format=%B").rstrip("\n")
    z = "\u200b"
    assert message.startswith(f"T1: Fixes #{z}3 for @{z}acme/owners, see https:{z}//gitlab.com/acme/shop/-/issues/3 "
                              f"Co-authored-by: M <m@{z}x.") and message.endswith("… (attempt 1)")
    assert "\n" not in message and len(message) == len("T1: ") + 100 + len(" (attempt 1)")
    assert git(path, "log", "-1", "--format=%(trailers)").strip() == ""


@pytest.mark.django_db(transaction=True)
def test_a_block_that_matches_nothing_goes_back_with_the_nearest_lines(planned, steps, scripted):
    scripted.enqueue(STALE).enqueue(EDITS)
    assert steps.run("engineer").state == "done"
    first, repaired = scripted.requests
    assert first.system.startswith(load_prompt("senior_engineer_edits").strip())
    assert "return round(sum(prices), 2)" in first.messages[0]["content"]  # the file as it stands, shown
    text = repair_text(repaired)
    assert "block 1 (src/shop/cart.py): the search text matches no place" in text
    assert "The nearest lines are 2-2" in text and "return round(sum(prices), 2)" in text
    assert "if p is not None" in (workspace_for(fresh(planned)).path / "src/shop/cart.py").read_text()


@pytest.mark.django_db(transaction=True)
def test_a_task_writing_outside_its_plan_is_refused(planned, steps, scripted):
    scripted.enqueue(OUTSIDE).enqueue(ASIDE).enqueue(BESIDE)
    assert steps.run("engineer").state == "done"
    outside, aside = (repair_text(r) for r in scripted.requests[1:])
    assert "these files are not task T1's to write: ['src/shop/discount.py']" in outside
    assert "['src/other/helpers.py']" in aside
    path = workspace_for(fresh(planned)).path
    assert "total or 0" not in (path / "src/shop/discount.py").read_text()
    assert (path / "src/shop/prices.py").read_text() == "def known(prices):\n    return prices\n"  # beside its own


@pytest.mark.django_db(transaction=True)
def test_a_fix_sees_the_failing_tests_file_and_commits_its_edits(planned, steps, scripted):
    scripted.enqueue(EDITS)
    steps.run("engineer")
    req = fresh(planned)
    artifact_store(req, kind="test_report", name="self_test", metadata={"ok": False}, content={
        "failing_tests": ["tests/test_cart.py::test_missing_price_counts_as_zero", "not a path::x"],
        "output_tail": "AssertionError: 1.5 != 1.49"})
    step_schedule(requirement_id=req.pk, key=step_keys.FIX, attempt=2)
    fix = {"reasoning": "round after summing", "edits": [{
        "path": "tests/test_cart.py", "search": "    assert total([1.5, None]) == 1.5\n",
        "replace": "    assert total([1.5, None]) == pytest.approx(1.5)\n"}, {
        "path": "tests/test_cart.py", "search": "from shop.cart import total\n",
        "replace": "import pytest\n\nfrom shop.cart import total\n"}]}
    scripted.enqueue(fix)
    assert steps.run("engineer_fix").state == "done"
    (request,) = scripted.requests[1:]
    assert request.system.startswith(load_prompt("senior_engineer_fix_edits").strip())
    assert "AssertionError: 1.5 != 1.49" in request.messages[0]["content"]
    workspace = workspace_for(fresh(planned))
    assert [s for _, s in workspace.log()][-1] == "T1: fix (attempt 2)"
    assert "import pytest" in (workspace.path / "tests/test_cart.py").read_text()
    (call,) = req.llm_calls.filter(step__key="engineer_fix")
    assert {s["path"]: s["why"] for s in call.context_sources}["tests/test_cart.py"].startswith("changed by this requirement; ")
    assert steps.kinds()[-1:] == ["self_test"]
