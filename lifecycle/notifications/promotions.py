"""A new promotion proposal, announced to the project's owners (ADR 39): an e-mail to each of its organization's
active admins but the proposer, and a post to the project's webhook (else the operator's), once per event like a
review task's notifications.

The expected effect is the proposer's text, untrusted like a brief: it is put on a line of its own, quoted and
trimmed, without control or format characters, and the webhook escapes it as it escapes every message. The change is
named by what the proposal's validation admits (known prompt names, a budget's or table's paths), never by its diff
or its values; the evidence by its suite's name and its runs' counts."""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.urls import reverse

from lifecycle.evals.report import summary
from lifecycle.evals.suites import suite_name
from lifecycle.models import EvalRun, OutboxEvent, PromotedArtifact, PromotionDecision
from lifecycle.notifications.messages import render_text, untrusted_line
from lifecycle.notifications.sending import notifications_queue
from lifecycle.selectors import organization_admins

KIND = "promotion_proposed"


def promotion_proposed(event: OutboxEvent, *, event_key: str) -> None:
    """A proposal decided (or gone) before its announcement was worked out is not announced: it waits for no one."""
    row = (PromotionDecision.objects.select_related("project__organization", "proposed_by", "current_run",
                                                    "candidate_run")
           .filter(pk=event.payload.get("promotion")).first())
    if row is None or not row.is_open:
        return
    subject, body = render_text(KIND, _context(row))
    owners = organization_admins(row.project.organization_id).exclude(pk=row.proposed_by_id)
    notifications_queue(event_key=event_key, kind=KIND, subject=subject, body=body, users=owners,
                        webhook_of=row.project, project=row.project)


def promotion_url(row: PromotionDecision) -> str:
    return settings.AITEAM_PUBLIC_URL + reverse("admin:lifecycle_promotiondecision_change", args=[row.pk])


def _context(row: PromotionDecision) -> dict[str, Any]:
    return {"row": row, "project": row.project, "label": PromotedArtifact(row.artifact).label,
            "proposer": row.proposer_name,
            "changed": [change.get("prompt") or change.get("path") for change in row.change],
            "expected": untrusted_line(row.expected_effect), "run": row.candidate_run,
            "suite": suite_name(row.candidate_run.suite) if row.candidate_run else "",
            "before": _outcomes(row.current_run), "after": _outcomes(row.candidate_run), "url": promotion_url(row)}


def _outcomes(run: EvalRun | None) -> str:
    if run is None:
        return "no run"
    counts = summary(list(run.cases.all()))
    outcomes = ", ".join(f"{outcome} {n}" for outcome, n in sorted(counts["outcomes"].items()))
    return (f"{counts['cases']} case{'s' if counts['cases'] != 1 else ''} ({outcomes or 'none'}); hidden tests passed "
            f"in full: {counts['hidden_full']}; cost ${Decimal(counts['cost_usd']):.4f}")
