"""A suite run: each case in an evaluation project of its own, submitted through the services a person's brief or
ticket goes through, its gates decided by the evaluation policy, then measured and judged by its hidden tests."""
from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test.utils import override_settings
from django.utils import timezone

from lifecycle.actors import Actor
from lifecycle.errors import DomainError
from lifecycle.evals import hidden, measures
from lifecycle.evals.policy import settle
from lifecycle.evals.suites import Case, suite_id
from lifecycle.management.commands.aiteam_ticket import project_for
from lifecycle.models import EvalCase, EvalOutcome, EvalRun, Membership, Organization, Project, PromptBundle, Requirement
from lifecycle.models.evals import EVALUATION_ORGANIZATION, HiddenResult, evaluation_organization_slug
from lifecycle.services.intake import requirement_submit
from lifecycle.services.meta_eval import HIDDEN_TESTS, gate_contradicted
from lifecycle.services.tickets import ticket_submit
from lifecycle.states import Role
from lifecycle.tickets import Ticket, TicketSource

log = logging.getLogger("aiteam.progress")
ORGANIZATION = EVALUATION_ORGANIZATION
EVALUATOR = "eval"
CASE_TIMEOUT_S = 3600  # on workers: a case still running after this ends as failed


def eval_run_start(*, suite: str, bundle: PromptBundle | None, live: bool, profile: dict[str, Any] | None = None,
                   organization: Organization | None = None) -> EvalRun:
    """`profile`: the budget profile and playbook table ({"budgets": …, "playbooks": …}) each case's project runs
    with; none: the defaults. `organization`: whose versions these are (its candidate, its current prompts): the
    run and its cases' projects are then that organization's alone to read; none: an operator's run. The run names
    its suite as suite_id does, whatever path to it was given. An offline run needs the steps in this process: its
    cassettes are this process's, and workers would answer from their own."""
    if not live and not settings.CELERY_TASK_ALWAYS_EAGER:
        raise DomainError("an offline run answers each case from its cassette in this process, but CELERY_BROKER_URL "
                          "sends the steps to workers, which answer from their own: run it on the embedded default "
                          "(unset CELERY_BROKER_URL and DATABASE_URL) or against the workers with --live", "live")
    provider = settings.AITEAM_LLM_PROVIDER if live else "replay"
    return EvalRun.objects.create(suite=suite_id(suite), bundle=bundle, live=live, provider=provider,
                                  settings=profile or {}, organization=organization)


def eval_run_cases(run: EvalRun, cases: list[Case], *, progress: Callable[[str], None] = log.info) -> list[EvalCase]:
    """Every case, one after another, each reported as it ends; the run's bundle is the first case's when none
    was asked for."""
    rows = []
    for number, case in enumerate(cases, start=1):
        progress(f"[{number}/{len(cases)}] {case.name} ({case.kind}): running")
        row = eval_case_run(run, case)
        why = "".join(f" — {text}" for text in (row.error, row.hidden_error) if text)
        progress(f"[{number}/{len(cases)}] {case.name}: {row.outcome}, hidden {row.hidden} "
                 f"({row.hidden_passed}/{row.hidden_total}), {row.wall_s:.1f} s{why}")
        rows.append(row)
    if run.bundle_id is None:
        run.bundle_id = next((r.requirement.prompt_bundle_id for r in rows if r.requirement), None)
    run.finished_at = timezone.now()
    run.save(update_fields=["bundle", "finished_at"])
    return rows


def eval_case_run(run: EvalRun, case: Case) -> EvalCase:
    """The case's requirement from submission to its end, measured (the clock starts as the case is submitted,
    after its repository is built); a case that breaks before or while it runs is recorded as failed with the
    reason, and the suite goes on."""
    requirement, clock = None, _Clock()
    with tempfile.TemporaryDirectory(prefix=f"eval-{case.name}-") as scratch:
        try:
            with _case_settings(run, case, Path(scratch) / "wheels"):
                user, organization = evaluator(run.organization_id)
                requirement = _submit(run, case, user, organization, Path(scratch), clock)
                requirement = settle(requirement.pk, Actor.human(user, "cli"), timeout_s=CASE_TIMEOUT_S,
                                     poll_s=0.0 if settings.CELERY_TASK_ALWAYS_EAGER else 1.0)
                return _record(run, case, requirement, clock.elapsed())
        except Exception as exc:  # one broken case is a row saying why, not a lost suite
            log.exception("evaluation case %s broke", case.name)
            return EvalCase.objects.create(run=run, name=case.name, kind=case.kind, requirement=requirement,
                                           outcome=EvalOutcome.FAILED, state=getattr(requirement, "state", ""),
                                           wall_s=clock.elapsed(), error=f"{type(exc).__name__}: {exc}")


class _Clock:
    """The case's wall time: from its submission (start), 0 when it broke before."""

    started: float | None = None

    def start(self) -> None:
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return 0.0 if self.started is None else time.monotonic() - self.started


def _record(run: EvalRun, case: Case, requirement: Requirement, wall: float) -> EvalCase:
    """The case's measures and its hidden tests' verdict; hidden tests that break keep the measures, their result
    an error saying why."""
    try:
        judged = hidden.judge(requirement, case)
    except Exception as exc:  # the run's measures are the case's; only the hidden verdict is lost
        log.exception("the hidden tests of evaluation case %s broke", case.name)
        judged = hidden.Hidden(HiddenResult.ERROR, total=len(case.hidden_ids), error=f"{type(exc).__name__}: {exc}")
    gate = measures.quality_gate_passed(requirement)
    with transaction.atomic():  # the case and its log entry together, or neither
        if gate and judged.result in ("partial", "none"):  # a gate false pass, in the meta-evaluation log too
            gate_contradicted(requirement, gate="quality", verdict="pass", by=HIDDEN_TESTS, hidden=judged.result,
                              hidden_passed=judged.passed, hidden_total=judged.total, eval_run=run.pk, case=case.name)
        return _case_row(run, case, requirement, judged, gate, wall)


def _case_row(run: EvalRun, case: Case, requirement: Requirement, judged: Any, gate: bool | None,
              wall: float) -> EvalCase:
    return EvalCase.objects.create(
        run=run, name=case.name, kind=case.kind, requirement=requirement, outcome=measures.outcome_of(requirement),
        state=requirement.state, hidden=judged.result, hidden_passed=judged.passed, hidden_total=judged.total,
        hidden_error=judged.error,
        quality_gate_passed=gate, gate_false_pass=bool(gate) and judged.result in ("partial", "none"),
        attempts=measures.attempts_per_role(requirement), loops=measures.loops(requirement),
        gates=measures.gate_verdicts(requirement), wall_s=wall, critical_path_s=measures.critical_path_s(requirement),
        **measures.spend(requirement))


@contextmanager
def _case_settings(run: EvalRun, case: Case, wheels: Path) -> Iterator[None]:
    """The evaluation policy decides every gate (autonomous mode off, so none is decided twice); offline, the
    case's cassette answers; the wheels its repository installs are a package source."""
    overrides: dict[str, Any] = {"AITEAM_AUTONOMOUS": False,
                                 "AITEAM_PIP_FIND_LINKS": [*settings.AITEAM_PIP_FIND_LINKS, wheels]}
    if not run.live:
        if not case.cassette.is_file():
            raise FileNotFoundError(f"no cassette {case.cassette}: record one (docs/cassettes.md) or run --live")
        overrides |= {"AITEAM_LLM_PROVIDER": "replay", "AITEAM_REPLAY_CASSETTE": case.cassette}
    with override_settings(**overrides):
        yield


def _submit(run: EvalRun, case: Case, user: Any, organization: Organization, scratch: Path,
            clock: _Clock) -> Requirement:
    if case.repository is None:
        project, _ = Project.objects.get_or_create(organization=organization, slug=f"eval-{case.name}"[:100],
                                                   defaults={"name": f"evaluation: {case.name}"})
    else:
        repo = case.repository.build(scratch / "repo", scratch / "wheels")
        project = project_for(organization, repo=str(repo), base=case.repository.base, slug=f"eval-{case.name}"[:100])
    _use_versions(project, run)
    clock.start()
    if case.kind == "brief":
        return requirement_submit(user=user, brief=case.body, title=case.title, project=project, via="cli")
    ticket = Ticket(source=TicketSource.CLI, key=f"eval-{run.pk}-{case.name}"[:100], title=case.title, body=case.body)
    return ticket_submit(user=user, ticket=ticket, project=project).requirement


def _use_versions(project: Project, run: EvalRun) -> None:
    """The versions under evaluation are the evaluation project's own: a bundle asked for is its pinned prompts (the
    requirement's bundle is that one, completed with the shipped file of a prompt it lacks), and the run's budget
    profile and playbook table its settings.
    Evaluation projects are the one place these are set other than by a promotion (ADR 39)."""
    wanted = {key: value for key, value in run.settings.items() if key in ("budgets", "playbooks") and value}
    if run.bundle is not None:
        wanted["prompts"] = run.bundle.prompts
    kept = {key: value for key, value in project.settings.items() if key not in ("prompts", "budgets", "playbooks")}
    if project.settings != {**kept, **wanted}:
        project.settings = {**kept, **wanted}
        project.save(update_fields=["settings"])


def evaluator(for_organization: Any = None) -> tuple[Any, Organization]:
    """The evaluation's user, an admin of the evaluation organization its projects belong to: the shared one for an
    operator's run, one of its own for a run of an organization's versions (its projects hold them, so no member of
    another organization, nor of the shared one, reads them)."""
    slug = evaluation_organization_slug(for_organization)
    name = "Evaluations" if for_organization is None else f"Evaluations of organization {for_organization}"
    organization, _ = Organization.objects.get_or_create(slug=slug, defaults={"name": name})
    user, _ = get_user_model().objects.get_or_create(username=EVALUATOR)
    Membership.objects.update_or_create(user=user, organization=organization, defaults={"role": Role.ADMIN})
    return user, organization
