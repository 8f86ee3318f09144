"""The evaluation runs page (docs/evals.md): each suite's runs, a run against the previous one case by case, and
charts per prompt bundle. Two queries whatever the number of runs: the runs with their cases aggregated, then the
cases of the runs compared."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Exists, F, Q, QuerySet, Sum

from lifecycle.dashboard import charts
from lifecycle.dashboard.selectors import Scope
from lifecycle.evals.report import CaseChange, cache_share, case_changes, shown_share
from lifecycle.evals.running import ORGANIZATION
from lifecycle.models import EvalCase, EvalOutcome, EvalRun, HiddenResult, Organization

RUNS = 100  # the newest runs shown, all suites together
BUNDLE_CSS = ["", "second", "third"]  # one colour per bundle in a suite's charts, in turn


@dataclass
class Suite:
    name: str
    runs: list[EvalRun] = field(default_factory=list)  # newest first
    run: EvalRun | None = None  # the run compared with the one before it
    previous: EvalRun | None = None
    changes: list[CaseChange] = field(default_factory=list)
    charts: dict[str, charts.Chart] = field(default_factory=dict)


def visible_runs(scope: Scope) -> QuerySet:
    """Every run for a superuser; for other staff, the runs of their organizations' versions, and the operators'
    runs when they belong to the shared evaluation organization: the dashboard's rule, a staff member sees their
    organizations."""
    runs = EvalRun.objects.all()
    if scope.organization_ids is None:
        return runs
    member = Organization.objects.filter(slug=ORGANIZATION, pk__in=scope.organization_ids)
    return runs.filter(Q(organization__in=scope.organization_ids) | Q(Exists(member), organization=None))


def hidden_runs(scope: Scope) -> int:
    """How many of the operators' runs this staff member may not see (outside the evaluation organization): the
    page's empty message says why it is empty, not that no run exists. Other organizations' runs are not counted:
    their number is theirs."""
    if scope.organization_ids is None:
        return 0
    operators = EvalRun.objects.filter(organization=None)
    return operators.count() - visible_runs(scope).filter(organization=None).count()


def suites(scope: Scope, compare: int | None = None) -> list[Suite]:
    """The suites with their newest runs; in each, run `compare` (when it is one of the suite's runs with a finished
    run before it) or the newest finished run is set side by side with its baseline, the newest finished run before
    it: a run interrupted (or still running) is marked unfinished and is never a baseline."""
    by_suite: dict[str, Suite] = {}
    for run in _with_totals(visible_runs(scope))[:RUNS]:
        run.cache_share = shown_share(cache_share(run.uncached or 0, run.cache_read or 0, run.cache_written or 0))
        by_suite.setdefault(run.suite, Suite(run.suite)).runs.append(run)
    pairs = [_pair(suite, compare) for suite in by_suite.values()]
    ids = [run.pk for run, previous in pairs if previous for run in (run, previous)]
    cases: dict[int, list[EvalCase]] = {}
    for case in EvalCase.objects.filter(run_id__in=ids).order_by("id"):
        cases.setdefault(case.run_id, []).append(case)
    for suite, (run, previous) in zip(by_suite.values(), pairs, strict=True):
        suite.run, suite.previous = run, previous
        if previous:
            suite.changes = case_changes(cases.get(previous.pk, []), cases.get(run.pk, []))
        suite.charts = _charts(suite)
    return list(by_suite.values())


def bundle_version(run: EvalRun) -> str:
    return run.bundle_id[:12] if run.bundle_id else "default"


def _with_totals(runs: QuerySet) -> QuerySet:
    outcomes = {f"n_{o}": Count("cases", filter=Q(cases__outcome=o)) for o in EvalOutcome.values}
    hidden = {f"hidden_{h}": Count("cases", filter=Q(cases__hidden=h)) for h in HiddenResult.values}
    return runs.annotate(
        n_cases=Count("cases"), **outcomes, **hidden,
        false_passes=Count("cases", filter=Q(cases__gate_false_pass=True)),
        tokens=Sum(F("cases__input_tokens") + F("cases__output_tokens")), cost=Sum("cases__cost_usd"),
        uncached=Sum("cases__input_tokens"), cache_read=Sum("cases__cache_read_tokens"),
        cache_written=Sum("cases__cache_creation_tokens"),
        wall=Sum("cases__wall_s"),
    ).order_by("-started_at", "-pk")


def _pair(suite: Suite, compare: int | None) -> tuple[EvalRun, EvalRun | None]:
    """Run `compare` when it has a baseline, else the newest finished run (the newest run when none finished),
    with its baseline."""
    for run in suite.runs:
        run.baseline = next((older for older in suite.runs[suite.runs.index(run) + 1:] if older.finished_at), None)
    asked = next((run for run in suite.runs if run.pk == compare and run.baseline), None)
    run = asked or next((run for run in suite.runs if run.finished_at), suite.runs[0])
    return run, run.baseline


def _charts(suite: Suite) -> dict[str, charts.Chart]:
    """Runs oldest to newest within each bundle, bundles in the order they were first run: one colour per bundle."""
    oldest_first = suite.runs[::-1]
    bundles = list(dict.fromkeys(bundle_version(run) for run in oldest_first))
    ordered = sorted(oldest_first, key=lambda run: bundles.index(bundle_version(run)))
    css = [BUNDLE_CSS[i % len(BUNDLE_CSS)] for i in range(len(bundles))]

    def per_bundle(value: Any) -> list[tuple[str, list[float]]]:
        return [(f"#{run.pk}", [float(value(run)) if bundle_version(run) == b else 0 for b in bundles])
                for run in ordered]

    return {
        "hidden_full": charts.stacked(f"{suite.name}: hidden tests full per run (%)",
                                      per_bundle(lambda r: 100 * r.hidden_full / r.n_cases if r.n_cases else 0),
                                      names=bundles, css=css, unit=" %"),
        "cost": charts.stacked(f"{suite.name}: cost per run (USD)", per_bundle(lambda r: r.cost or 0),
                               names=bundles, css=css),
    }
