"""What a pull or merge request's body says of a repository requirement (agents/delivery/pr_body.py): its ticket,
its scope, and its tests before (the baseline at the base commit) and after (QC's run, else the self-tests).

Read from the stored artifacts, tolerant of what a report leaves out: a body says "no tests ran" rather than fail
a delivery that the gate already passed.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents.delivery.pr_body import Scope as BodyScope
from agents.delivery.pr_body import SuiteCounts, SuiteResults, TicketRef
from agents.repo.scope import Scope, ScopeLimits
from lifecycle.models import Requirement
from lifecycle.services.artifacts import content_json, latest
from lifecycle.states import ArtifactKind

OUTCOMES = ("passed", "failed", "errors", "skipped")


def ticket_ref(requirement: Requirement) -> TicketRef | None:
    if not requirement.ticket_key:
        return None
    return TicketRef(source=requirement.ticket_source, key=requirement.ticket_key, title=requirement.title,
                     url=requirement.ticket_url, via_webhook=requirement.ticket_via_webhook,
                     repository_id=requirement.ticket_repository_id)


def change_scope(scope: Scope, limits: ScopeLimits) -> BodyScope:
    added = sum(f.added for f in scope.files)
    return BodyScope(lines_added=added, lines_removed=scope.lines_changed - added, modules=scope.modules,
                     files=tuple(f.path for f in scope.files), flags=tuple(scope.reasons(limits)))


def change_tests(requirement: Requirement) -> SuiteResults:
    after = latest(requirement, ArtifactKind.TEST_REPORT, "qc") or latest(requirement, ArtifactKind.TEST_REPORT,
                                                                            "self_test")
    report = _json(after)
    baseline = _json(latest(requirement, ArtifactKind.BASELINE))
    comparison = report.get("comparison") if isinstance(report.get("comparison"), dict) else {}
    reproduced = [r.get("test", "") for r in comparison.get("reproductions") or [] if isinstance(r, dict) and r.get("ok")]
    return SuiteResults(
        after=_counts({**report, **(after.metadata if after else {})}) or SuiteCounts(0, 0),
        before=_counts(comparison.get("before") or {}) or _baseline_counts(baseline),
        base_commit=requirement.base_sha,
        fail_to_pass=tuple(str(t) for t in [*reproduced, *(comparison.get("fixed") or [])] if t),
        newly_failing=tuple(str(t) for t in [*(comparison.get("broken") or []), *(comparison.get("disappeared") or [])]),
    )


def _baseline_counts(baseline: Mapping[str, Any]) -> SuiteCounts | None:
    """A baseline as agents/environments/baseline.Baseline stores it ({"outcomes": {test: outcome}}), whether at
    the top or under "baseline"; or counts stored as such."""
    inner = baseline.get("baseline") if isinstance(baseline.get("baseline"), dict) else baseline
    outcomes = inner.get("outcomes")
    if isinstance(outcomes, dict):
        if not outcomes:
            return None
        values = list(outcomes.values())
        return SuiteCounts(*(values.count(kind) for kind in OUTCOMES))
    return _counts(inner.get("counts") or inner)


def _counts(data: Mapping[str, Any]) -> SuiteCounts | None:
    if not isinstance(data, Mapping) or not any(isinstance(data.get(k), int) for k in ("passed", "failed")):
        return None
    return SuiteCounts(*(int(data.get(kind) or 0) for kind in OUTCOMES))


def _json(artifact: Any) -> dict[str, Any]:
    if artifact is None:
        return {}
    try:
        data = content_json(artifact)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
