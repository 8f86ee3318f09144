"""Runs on an existing repository, driven step by step: a project whose repo_url is a bare repository with
history under the operator's local root, a requirement branched from it, and the steps it schedules held and run
one at a time through the real runner (eagerly), so a test stops where it wants.

The repo_prepare step is another piece of work (docs/adr/0035); `branch_from_repository` does the part of it these
tests need (the base commit recorded and the workspace opened) and hands over to clarification.
"""
from __future__ import annotations

from pathlib import Path

from django.conf import settings

from agents.repo.workspace import RepoWorkspace
from aiteam.celery import app
from lifecycle import step_keys
from lifecycle.models import Project, Requirement, Step
from lifecycle.services import dispatch
from lifecycle.services.repositories import mirror_for, requirement_branch
from lifecycle.services.scheduling import step_schedule
from lifecycle.states import StepState
from tests.repo_history import COMMITS, commit_files, git

TICKET = ("Bug: shop.cart.total crashes when a price is missing. total([1.5, None]) raises TypeError in "
          "src/shop/cart.py; a missing price should count as 0.")
PO_TICKET = {
    "verdict": "clear", "reasoning": "The ticket names the function, the input and the expected result.",
    "summary": "shop.cart.total raises TypeError when a price is None; a missing price should count as 0.",
    "objectives": ["total skips missing prices"], "out_of_scope": [], "assumptions": [],
    "constraints": ["keep the signature of total"], "success_metrics": [],
    "acceptance_criteria": ["total([1.5, None]) returns 1.5", "total([1, 2]) still returns 3"],
}
LOCALIZED = {"reasoning": "total sums the prices; its test sits beside it.", "files": [
    {"path": "src/shop/cart.py", "action": "change", "symbols": ["total"], "reason": "total sums the prices"},
    {"path": "tests/test_cart.py", "action": "change", "symbols": ["test_total"], "reason": "the regression test"},
    {"path": "src/shop/discount.py", "action": "read", "reason": "applies to a total; must keep working"},
]}
PLAN = {
    "reasoning": "One function and its regression test.",
    "interfaces": [{"name": "total", "signature": "shop.cart.total(prices) -> float"}],
    "tech_stack": ["Python 3.11", "pytest"],
    "tasks": [{"key": "T1", "title": "Count missing prices as zero", "story_refs": [1, 2],
               "files": ["src/shop/cart.py", "tests/test_cart.py"], "depends_on": [],
               "definition_of_done": "total([1.5, None]) is 1.5 and the regression test passes"}],
}
EDITS = {"reasoning": "Skip None when summing; a regression test.", "edits": [
    {"path": "src/shop/cart.py", "search": "    return round(sum(prices), 2)\n",
     "replace": "    return round(sum(p for p in prices if p is not None), 2)\n"},
    {"path": "tests/test_cart.py", "search": "def test_total():\n    assert total([1, 2]) == 3\n",
     "replace": "def test_total():\n    assert total([1, 2]) == 3\n\n\ndef test_missing_price_counts_as_zero():\n"
                "    assert total([1.5, None]) == 1.5\n"},
]}


def repository_project(project: Project, tmp: Path, commits=COMMITS) -> Path:
    """Give `project` a repo_url: a bare repository at the operator's local root, at the project's own path."""
    settings.AITEAM_GIT_LOCAL_ROOT = tmp / "remotes"
    origin = settings.AITEAM_GIT_LOCAL_ROOT / f"{project.organization_id}/{project.pk}.git"
    work = tmp / "dev"
    origin.parent.mkdir(parents=True, exist_ok=True)
    git(tmp, "init", "-q", "--bare", "-b", "main", str(origin))
    git(tmp, "init", "-q", "-b", "main", str(work))
    for message, files in commits:
        commit_files(work, message, files)
    git(work, "push", "-q", str(origin), "main")
    project.repo_url = str(origin)
    project.save(update_fields=["repo_url"])
    return origin


def branch_from_repository(requirement: Requirement) -> RepoWorkspace:
    """What repo_prepare records for these tests: the base commit, the workspace on the requirement's branch; then
    clarification is scheduled."""
    workspace = RepoWorkspace.open(mirror_for(requirement.project), Path(settings.AITEAM_WORKSPACE_ROOT) /
                                   str(requirement.pk), branch=requirement_branch(requirement),
                                   base=requirement.project.base_branch)
    Requirement.objects.filter(pk=requirement.pk).update(base_sha=workspace.base_sha)
    Step.objects.filter(requirement=requirement, key=step_keys.REPO_PREPARE).update(state=StepState.SKIPPED)
    step_schedule(requirement_id=requirement.pk, key=step_keys.PO_CLARIFY, attempt=requirement.clarification_round)
    return workspace


class HeldSteps:
    """Steps are scheduled as usual but not sent; `run(kind)` sends the oldest held one of that kind."""

    def __init__(self, monkeypatch) -> None:
        self.held: list[int] = []
        monkeypatch.setattr(dispatch, "send_step", lambda step_id, key, countdown=None: self.held.append(step_id))

    def kinds(self) -> list[str]:
        return [step_keys.kind_of(key) for key in Step.objects.filter(pk__in=self.held).order_by("id")
                .values_list("key", flat=True)]

    def run(self, kind: str) -> Step:
        step = next((s for s in Step.objects.filter(pk__in=self.held).order_by("id")
                     if step_keys.kind_of(s.key) == kind), None)
        assert step is not None, f"no {kind} step held; held: {self.kinds()}"
        self.held.remove(step.pk)
        app.tasks[dispatch.RUN_STEP].apply((step.pk,))
        return Step.objects.get(pk=step.pk)


def ticket_on_repository(project: Project, user, tmp: Path) -> Requirement:
    """The shop ticket (a bug) submitted on the shop repository and branched from main: clarification is next."""
    from lifecycle.services.intake import requirement_submit

    repository_project(project, tmp)
    req = requirement_submit(user=user, brief=TICKET, title="Missing prices", playbook="bug_fix")
    branch_from_repository(Requirement.objects.get(pk=req.pk))
    return Requirement.objects.get(pk=req.pk)


def repair_text(request) -> str:
    """The repair request a scripted model's request carries last: the tool result that refused its answer."""
    (result,) = request.messages[-1]["content"]
    assert result["type"] == "tool_result" and result["is_error"]
    return result["content"]
