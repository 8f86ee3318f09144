"""The PM's status digest per requirement: state, time in state, blockers, escalations, loops, spend.

Computed from the record, not generated: no model call, so it is cheap to refresh on
every event that matters and once a day from beat.
"""
from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

from lifecycle.models import Requirement
from lifecycle.services.artifacts import artifact_store
from lifecycle.states import NON_TERMINAL_STATES, ArtifactKind, ReviewKind

log = logging.getLogger(__name__)


def digest_facts(requirement: Requirement) -> dict:
    now = timezone.now()
    last = requirement.transitions.filter(subject="requirement").order_by("-id").first()
    since = last.created_at if last else requirement.created_at
    pending = list(requirement.review_tasks.pending().values("kind", "question", "sla_deadline"))
    spend = requirement.llm_calls.values("role").annotate(calls=Count("id"), tokens=Sum("input_tokens"),
                                                          output=Sum("output_tokens"), cost=Sum("cost_usd"))
    return {
        "state": requirement.state,
        "time_in_state_s": int((now - since).total_seconds()),
        "blockers": [{"kind": t["kind"], "question": t["question"][:200], "overdue": t["sla_deadline"] < now}
                     for t in pending],
        "escalations": requirement.review_tasks.filter(kind=ReviewKind.ESCALATION).count(),
        "loops": {"story_rounds": requirement.story_round, "design_rounds": requirement.design_round,
                  "engineer_attempts": requirement.dev_attempts, "code_review_rounds": requirement.code_review_round},
        "llm_spend": {row["role"]: {"calls": row["calls"], "input_tokens": row["tokens"] or 0,
                                    "output_tokens": row["output"] or 0, "cost_usd": float(row["cost"] or 0)}
                      for row in spend},
        "headline": _headline(requirement, pending),
    }


def digest_refresh(requirement: Requirement) -> None:
    """Store a new digest version; the lock serializes versions when events and the beat race."""
    requirement = Requirement.objects.select_for_update().get(pk=requirement.pk)
    facts = digest_facts(requirement)
    artifact_store(requirement, kind=ArtifactKind.STATUS_DIGEST, name="digest", content=facts,
                   summary=facts["headline"], role="project_manager")


def digests_refresh_all() -> int:
    refreshed = 0
    for requirement in Requirement.objects.filter(state__in=NON_TERMINAL_STATES).iterator():
        try:
            with transaction.atomic():
                digest_refresh(requirement)
            refreshed += 1
        except Exception:  # one requirement's problem (of any kind) must not cost the others their digest
            log.exception("status digest of %s failed", requirement.pk)
    return refreshed


def _headline(requirement: Requirement, pending: list[dict]) -> str:
    if pending:
        kinds = ", ".join(sorted({t["kind"] for t in pending}))
        return f"{requirement.get_state_display()}: waiting for a human ({kinds})"
    return f"{requirement.get_state_display()}: in progress" if requirement.state in NON_TERMINAL_STATES \
        else requirement.get_state_display()
