"""Each role's context on the Django repository (the lifecycle side of bench/repo_context.py, docs/adr/0035).

Django is configured on a scratch SQLite database under a temporary AITEAM_VAR_DIR (the embedded default's
layout: workspaces, mirrors and the local remotes below it), with an in-memory broker nobody consumes, so a step
runs only when this module runs it. The project's repo_url is a bare repository of the Django source; each ticket
becomes a requirement branched from it the way tests/repo_steps.py's `branch_from_repository` does (the base
commit recorded, the workspace opened: the rest of repo_prepare, the environment and the baseline, is not what
is measured), then clarification, localization, the plan and the engineer's edits run through the real runner
(`lifecycle.runner.run_step`) on the replay provider with a cassette this module writes: no network, no model.

The contexts are built with the real builders (lifecycle/contexts.py) and counted as the budgets count them
(`json_tokens` of the context's JSON, agents/repo/budget.py); what went in is `context_sources`, what
`LLMCall.context_sources` records.
"""
from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import django

BROKER = "memory://localhost/"  # not eager, and no worker: a scheduled step waits until run_step() runs it
SUBMITTER = "bench"


def configure(var: Path, cassette: Path) -> None:
    os.environ.update({"DJANGO_SETTINGS_MODULE": "aiteam.settings", "AITEAM_VAR_DIR": str(var),
                       "CELERY_BROKER_URL": BROKER, "AITEAM_LLM_PROVIDER": "replay",
                       "AITEAM_REPLAY_CASSETTE": str(cassette), "AITEAM_LOG_LEVEL": "WARNING"})
    for name in ("DATABASE_URL", "ANTHROPIC_API_KEY"):
        os.environ.pop(name, None)
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs each index build at DEBUG


def project_on(source: Path, git_env: dict):
    """A project whose repo_url is a bare copy of `source` under the operator's local root, and its submitter."""
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from lifecycle.models import Membership, Organization, Project

    org = Organization.objects.create(slug="bench", name="bench")
    project = Project.objects.create(organization=org, slug="django", name="django")
    origin = Path(settings.AITEAM_GIT_LOCAL_ROOT) / str(org.pk) / f"{project.pk}.git"
    origin.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], env=git_env, check=True)
    subprocess.run(["git", "-C", str(source), "push", "-q", str(origin), "HEAD:refs/heads/main"], env=git_env,
                   check=True)
    Project.objects.filter(pk=project.pk).update(repo_url=str(origin))
    user = get_user_model().objects.create(username=SUBMITTER)
    Membership.objects.create(user=user, organization=org, role="submitter")
    return Project.objects.get(pk=project.pk), user


def ticket_requirement(project, user, ticket: str):
    """The ticket submitted and branched from main (as tests/repo_steps.branch_from_repository): clarification
    is next."""
    from django.conf import settings

    from agents.repo.workspace import RepoWorkspace
    from lifecycle import step_keys
    from lifecycle.models import Requirement, Step
    from lifecycle.services.intake import requirement_submit
    from lifecycle.services.repositories import mirror_for, requirement_branch
    from lifecycle.services.scheduling import step_schedule
    from lifecycle.states import StepState

    req = requirement_submit(user=user, brief=ticket, title=ticket, project=project, playbook="bug_fix")
    workspace = RepoWorkspace.open(mirror_for(project), Path(settings.AITEAM_WORKSPACE_ROOT) / str(req.pk),
                                   branch=requirement_branch(req), base=project.base_branch)
    Requirement.objects.filter(pk=req.pk).update(base_sha=workspace.base_sha)
    Step.objects.filter(requirement=req, key=step_keys.REPO_PREPARE).update(state=StepState.SKIPPED)
    step_schedule(requirement_id=req.pk, key=step_keys.PO_CLARIFY, attempt=1)
    return Requirement.objects.get(pk=req.pk)


def run_step(req, kind: str) -> float:
    """Run the oldest queued step of `kind` through the real runner; its wall time in seconds."""
    from aiteam.celery import app
    from lifecycle import step_keys
    from lifecycle.models import Step
    from lifecycle.services import dispatch
    from lifecycle.states import StepState

    step = next(s for s in Step.objects.filter(requirement=req, state=StepState.QUEUED).order_by("id")
                if step_keys.kind_of(s.key) == kind)
    start = time.perf_counter()
    app.tasks[dispatch.RUN_STEP].apply((step.pk,))
    took = time.perf_counter() - start
    step.refresh_from_db()
    if step.state != StepState.DONE:
        raise RuntimeError(f"{kind} ended {step.state}: {step.error}")
    return took


# --- the scripted answers: a clear ticket, a localization naming the file and a definition in it, a one-task plan,
# --- an edit at that definition -------------------------------------------------------------------------------
def answers(ticket: str, path: str, symbol: str, read: str | None, source: str, line: int) -> list[dict]:
    located = [{"path": path, "action": "change", "symbols": [symbol], "reason": f"{symbol} is where it goes wrong"}]
    if read:
        located.append({"path": read, "action": "read", "reason": "the best search hit outside the file to change"})
    clarified = {
        "verdict": "clear", "reasoning": "The ticket names the function and the wrong behaviour.", "summary": ticket,
        "objectives": [f"{symbol} behaves as the ticket expects"], "out_of_scope": [], "assumptions": [],
        "constraints": [f"keep the signature of {symbol}"], "success_metrics": [],
        "acceptance_criteria": [f"{symbol} behaves as the ticket expects", "the existing tests still pass"],
    }
    plan = {"reasoning": "One definition and its regression test.",
            "interfaces": [{"name": symbol, "signature": f"{symbol}(...)"}], "tech_stack": ["Python 3", "Django"],
            "tasks": [{"key": "T1", "title": f"Fix {symbol}", "story_refs": [1, 2], "files": [path],
                       "depends_on": [], "definition_of_done": "the ticket's case works and the tests pass"}]}
    search = unique_lines(source, line)
    edits = {"reasoning": "Mark the definition the fix is in.", "edits": [
        {"path": path, "search": search, "replace": f"# {symbol}: see the ticket\n{search}"}]}
    pin = {"title": ticket}
    return [{"role": "product_owner", "recorded_for": pin, "tool_input": clarified},
            {"role": "tech_lead", "tool": "submit_localization_output", "recorded_for": pin,
             "tool_input": {"reasoning": f"{symbol} in {path}.", "files": located}},
            {"role": "tech_lead", "tool": "submit_ticket_plan_output", "recorded_for": pin, "tool_input": plan},
            {"role": "senior_engineer", "tool": "submit_edits_output", "recorded_for": pin, "tool_input": edits}]


def unique_lines(source: str, line: int) -> str:
    """The shortest run of whole lines from `line` (1-based) that occurs once in the file: a search block."""
    lines = source.splitlines(keepends=True)
    for end in range(line, len(lines) + 1):
        block = "".join(lines[line - 1:end])
        if source.count(block) == 1:
            return block
    raise ValueError(f"no unique block from line {line}")


def tool_input(interactions: list[dict], tool: str) -> dict:
    return next(i["tool_input"] for i in interactions if i.get("tool") == tool)


def write_cassette(path: Path, interactions: list[dict]) -> None:
    path.write_text(json.dumps({"interactions": interactions}, indent=1), encoding="utf-8")


# --- what is measured ------------------------------------------------------------------------------------------
def median_ms(call, runs: int) -> tuple[object, float]:
    results = []
    for _ in range(runs):
        start = time.perf_counter()
        result = call()
        results.append((result, time.perf_counter() - start))
    return results[-1][0], statistics.median(t for _, t in results) * 1000


def tokens_of(context) -> int:
    from agents.repo.budget import json_tokens

    return json_tokens(context.model_dump(mode="json"))


def sources_of(context) -> str:
    """What went in, as LLMCall.context_sources records it: files, and the definitions named in them."""
    from lifecycle.services.llm_calls import context_sources

    sources = context_sources(context)
    files = {s["path"] for s in sources}
    symbols = {(s["path"], s["symbol"]) for s in sources if s.get("symbol")}
    return f"{len(files)} file{'s' * (len(files) != 1)}, {len(symbols)} definition{'s' * (len(symbols) != 1)}"


def shown_of(context) -> str:
    """What the repository part of a context holds: the map and the hits, the diff, each file whole or in
    excerpts (lines shown of its total), and the files left out."""
    if hasattr(context, "repository_map"):
        return f"map: {context.map_note.split(';')[0]}; {len(context.search_hits)} search hits"
    if hasattr(context, "modules"):
        return f"{len(context.modules)} module paths, no text"
    parts = [f"diff {context.diff.count(chr(10)):,} lines{' (cut)' if context.diff_cut else ''}"] \
        if hasattr(context, "diff") else []
    for view in context.files:
        whole = getattr(view, "whole", True)  # the review shows a file whole or not at all
        parts.append(f"{Path(view.path).name} {'whole' if whole else excerpt_lines(view)}")
    if context.not_shown:
        parts.append(f"not shown: {', '.join(Path(p).name for p in context.not_shown)}")
    return "; ".join(parts)


def excerpt_lines(view) -> str:
    shown = sum(e.text.count("\n") for e in view.excerpts)
    return f"{shown:,} of {view.total_lines:,} lines" if view.exists else "(new)"


@dataclass(frozen=True)
class Localized:
    step_ms: float  # the tl_localize step through the runner, the answer replayed
    build_ms: float  # contexts.localize_context: the index from its cache, search and map within the budget
    index_ms: float  # of which the index loaded from its cache
    check_ms: float  # LocalizationOutput checked against the index
    repair_ms: float  # a wrong path refused, with the nearest paths
    repair: str
    context: object


def refusal(schema, answer: dict, context) -> str:
    """The repair request an answer naming a path the repository lacks gets."""
    try:
        schema.model_validate(answer, context=context)
    except ValueError as exc:  # pydantic's ValidationError
        return str(exc)
    raise AssertionError("a path not in the repository was accepted")


@dataclass(frozen=True)
class Built:
    role: str
    step: str
    context: object = None
    build_ms: float | None = None
    error: str = ""  # the builder raised: what the step would fail with
    sent: int | None = None  # the request the step sent (LLMCall.messages), for the steps this bench runs


def with_call(row: Built, req, key: str) -> Built:
    """`row` with the size of the request its step sent; its recorded sources must be the context's."""
    from agents.repo.budget import estimate_tokens
    from lifecycle.models import LLMCall
    from lifecycle.services.llm_calls import context_sources

    (call,) = LLMCall.objects.filter(requirement=req, step__key=key)
    assert call.context_sources == context_sources(row.context), f"{key}: the context rebuilt is not the one sent"
    return Built(row.role, row.step, row.context, row.build_ms, sent=estimate_tokens(call.messages[0]["content"]))


def built(role: str, step: str, build, runs: int) -> Built:
    try:
        context, took = median_ms(build, runs)
    except Exception as exc:  # noqa: BLE001 -- a context that cannot be built is a figure to report, not to hide
        return Built(role, step, error=f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
    return Built(role, step, context, took)


def each_role(req, runs: int) -> list[Built]:
    """After localization: the plan's context, then the plan step; the engineer's context, then the engineer's
    edits committed; the code review's and QC's contexts on that change."""
    from lifecycle import contexts

    plan = built("tech_lead", "plan", lambda: contexts.plan_context(req.pk), runs)
    run_step(req, "tl_plan")
    engineer = built("senior_engineer", "engineer", lambda: contexts.engineer_context(req.pk, "T1", 1), runs)
    run_step(req, "engineer")
    plan, engineer = with_call(plan, req, "tl_plan"), with_call(engineer, req, "engineer:T1")
    review = built("tech_lead", "code review", lambda: contexts.code_review_context(req.pk, 1), runs)
    qc = built("qc_engineer", "QC tests", lambda: contexts.qc_context(req.pk), runs)
    return [plan, engineer, review, qc]


def against_budget(context, role: str) -> str:
    """Tokens against the role's budget (the project sets none: the defaults); QC's context is not budgeted."""
    from agents.repo.budget import context_budget
    from agents.schemas.repository import RepositoryContext

    tokens, budget = tokens_of(context), context_budget(role, None)
    note = " **over**" if tokens > budget else ""
    note += "" if isinstance(context, RepositoryContext) else " (not budgeted)"
    return f"{tokens:,} / {budget:,}{note}"
