"""What the troubleshooter reads (ADR 36): a requirement's failure routes with their traces, its failed steps'
errors, its test reports and its attempts, as short text. Each function takes a requirement the caller already
found within the asker's organization (assistant_tools.Scope); each is cut to a few rows, newest first, because
the model's context is bounded. Step errors are stored redacted; nothing here reads anything else.
"""
from __future__ import annotations

import json
from typing import Any

from lifecycle.models import Artifact, FailureRoute, Requirement, Step
from lifecycle.services.artifacts import content_json
from lifecycle.states import ArtifactKind, StepState

ROUTES_SHOWN = 8
ERRORS_SHOWN = 12
REPORTS_SHOWN = 4
STEPS_SHOWN = 60
ERROR_CHARS = 600
FACT_CHARS = 400
FAILING_SHOWN = 10
TAIL_CHARS = 600


def failure_routes(requirement: Requirement) -> str:
    """Each failure's route, newest first: what failed, the first rule that matched, where it went, what it caused,
    the facts it was classified on and the trace (the rules that matched, with why; the ones that did not, named)."""
    routes = list(FailureRoute.objects.filter(requirement=requirement).select_related("step")
                  .order_by("-id")[:ROUTES_SHOWN])
    if not routes:
        return f"no failure was routed for '{requirement}'"
    return "\n\n".join(_route_text(route) for route in routes)


def _route_text(route: FailureRoute) -> str:
    step = f" step {route.step.key}#{route.step.attempt}" if route.step else ""
    matched = [t for t in route.trace if t.get("matched")]
    lines = [f"{route.created_at:%Y-%m-%d %H:%M} UTC {route.source}{step}: {clip(route.summary, 300)}",
             f"  routed to {route.route} by rule {route.rule}; it caused: {route.action}",
             f"  facts: {clip(json.dumps(route.facts, default=str, sort_keys=True), FACT_CHARS)}"]
    lines += [f"  trace: {t.get('rule')} matched → {t.get('route')}: {t.get('because')}" for t in matched]
    unmatched = [str(t.get("rule")) for t in route.trace if not t.get("matched")]
    if unmatched:
        lines.append(f"  trace: not matched: {', '.join(unmatched)}")
    return "\n".join(lines)


def step_errors(requirement: Requirement) -> str:
    """The steps that ended with an error (failed, or parked by the budget gate), newest first."""
    steps = list(Step.objects.filter(requirement=requirement).exclude(error="").order_by("-id")[:ERRORS_SHOWN])
    if not steps:
        return f"no step of '{requirement}' recorded an error"
    return "\n".join(f"{s.key}#{s.attempt} {s.state} after {s.runs} run(s)"
                     f"{f' at {s.finished_at:%Y-%m-%d %H:%M} UTC' if s.finished_at else ''}: {clip(s.error, ERROR_CHARS)}"
                     for s in steps)


def test_reports(requirement: Requirement, *, shown: int = REPORTS_SHOWN) -> str:
    """The newest test reports: the engineer's self-tests and QC's quality gate, with counts, the gate's reasons,
    the failing tests and the output's tail."""
    reports = list(requirement.artifacts.filter(kind=ArtifactKind.TEST_REPORT).select_related("blob")
                   .order_by("-created_at", "-version")[:shown])
    if not reports:
        return f"'{requirement}' has no test report yet"
    return "\n\n".join(_report_text(report) for report in reports)


def _report_text(report: Artifact) -> str:
    content = _content(report)
    meta = {**content, **report.metadata}
    which = "quality gate (QC)" if report.name == "qc" else "self-tests" if report.name == "self_test" else report.name
    counts = ", ".join(f"{meta[k]} {k}" for k in ("passed", "failed", "errors") if k in meta)
    lines = [f"{which} v{report.version} ({report.created_at:%Y-%m-%d %H:%M} UTC): {'ok' if meta.get('ok') else 'NOT ok'}"
             f"; {counts}; {clip(report.summary, 300)}"]
    if "score" in meta:
        lines.append(f"  quality score {meta['score']}; gate reasons: "
                     f"{'; '.join(map(str, (content.get('gate') or {}).get('reasons') or [])) or 'none'}")
    failing = [str(t) for t in content.get("failing_tests") or []]
    if failing:
        lines.append(f"  failing ({len(failing)}): {', '.join(failing[:FAILING_SHOWN])}")
    if meta.get("lost_tests"):
        lines.append(f"  tests lost since the previous run: {', '.join(map(str, meta['lost_tests'][:FAILING_SHOWN]))}")
    tail = str(content.get("output_tail") or "").strip()
    if tail and not meta.get("ok"):
        lines.append(f"  output tail: {tail[-TAIL_CHARS:]}")
    return "\n".join(lines)


def attempt_history(requirement: Requirement) -> str:
    """Every step by key and attempt, in order: how the requirement got where it is (the engineer gets three
    attempts before a human is asked)."""
    newest = list(Step.objects.filter(requirement=requirement).order_by("-id")[:STEPS_SHOWN + 1])
    if not newest:
        return f"'{requirement}' has run no step yet"
    lines = [f"'{requirement}': engineer attempts {requirement.dev_attempts}, code review rounds "
             f"{requirement.code_review_round}, state {requirement.state}"]
    if len(newest) > STEPS_SHOWN:
        lines.append(f"(the newest {STEPS_SHOWN} steps)")
    for step in reversed(newest[:STEPS_SHOWN]):
        error = f": {clip(step.error, 160)}" if step.error and step.state != StepState.DONE else ""
        lines.append(f"{step.key}#{step.attempt} {step.state} ({step.runs} run(s)){error}")
    return "\n".join(lines)


def clip(text: Any, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _content(report: Artifact) -> dict[str, Any]:
    try:
        content = content_json(report)
    except ValueError:
        return {}
    return content if isinstance(content, dict) else {}
