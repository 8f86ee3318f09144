"""The optimizer (ADR 39): a proposer that reads the meta-evaluation log and drafts a candidate prompt bundle for the
role whose fixes keep failing the same way, a constraint in that role's fix prompts. It proposes through the same
protocol as a person (evaluated on a suite, decided by the project's owners); it never decides.

The constraint is built from the log's codes only (the failure's source and rule, counts), never from a failure's
text: a test's output or a review note is untrusted and must not reach a system prompt."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from lifecycle.failure_rules import Source
from lifecycle.models import MetaEvalLog, MetaKind, Project, PromotedArtifact, PromotionDecision, PromptBundle
from lifecycle.services.promotions import OPTIMIZER, bundle_with, current_version, open_proposal

RECURRING = 2  # a failure kind back after at least this many fixes routed to one role
WINDOW = timedelta(days=30)
# The prompts a role's fix is written with (a new project's, an existing repository's). Only the engineer's: a
# failure routed to the architect or the analyst is fixed through a person's review (their prompts never see it).
FIX_PROMPTS = {"senior_engineer": ("senior_engineer_fix", "senior_engineer_fix_edits")}
CHECKS = {
    Source.SELF_TEST: "read the failing test's assertion and error in the data, name their cause in your reasoning, "
                      "and change the code that causes them, never the test's expectation",
    Source.CODE_REVIEW: "list every point of the review notes in your reasoning and change the code for each one; a "
                        "point left unaddressed brings the review back",
    Source.QUALITY_GATE: "check every failing acceptance test and gate finding in the data and make the code meet "
                         "the acceptance criterion as written",
}
MARKER = "Constraint from the meta-evaluation log"


@dataclass(frozen=True)
class Draft:
    role: str
    failure_kind: str
    recurrences: int
    bundle: str  # the candidate prompt bundle's sha256
    expected: str
    why: str


def draft_constraint(project: Project, *, now=None) -> Draft | None:
    """The most recurring (role, failure kind) of the project's judged routes in the window, with a prompt the
    optimizer may amend and no constraint for it already current or proposed (by the optimizer, or the very bundle by
    anyone); None when nothing recurs enough."""
    project = Project.objects.get(pk=project.pk)  # its versions as they are now
    since = (now or timezone.now()) - WINDOW
    routes = MetaEvalLog.objects.filter(kind=MetaKind.ROUTE, project=project, created_at__gte=since,
                                        role__in=FIX_PROMPTS).values_list("role", "data", "created_at")
    judged, recurred, latest = Counter(), Counter(), {}
    for role, data, at in routes:
        kind = data.get("failure_kind", "")
        judged[role, kind] += 1
        if data.get("recurred"):
            recurred[role, kind] += 1
            latest[role, kind] = max(at, latest.get((role, kind), at))
    current = current_version(project, PromotedArtifact.PROMPTS)[0]
    prompts_now = PromptBundle.objects.get(sha256=current).prompts
    for (role, kind), count in recurred.most_common():
        if count < RECURRING or _already(project, prompts_now, role, kind, latest[role, kind]):
            continue
        source = Source(kind.split(":", 1)[0])
        if source not in CHECKS:
            continue
        constraint = (f"\n\n{MARKER} ({kind}): on this project the same failure came back after {count} of "
                      f"{judged[role, kind]} fixes routed to you. Before you answer, {CHECKS[source]}.\n")
        prompts = {name: prompts_now[name] + constraint for name in FIX_PROMPTS[role]}
        bundle = bundle_with(project, prompts)
        if open_proposal(project, PromotedArtifact.PROMPTS, bundle.pk, current):
            continue  # someone proposed this very bundle: it waits for the owners (proposing it again is refused)
        return Draft(role=role, failure_kind=kind, recurrences=count, bundle=bundle.pk,
                     expected=f"{kind} stops coming back after a fix routed to {role} "
                              f"(now {count} of {judged[role, kind]} fixes in {WINDOW.days} days)",
                     why=f"{OPTIMIZER}: the meta-evaluation log's route entries for {project} since "
                         f"{since:%Y-%m-%d}; a constraint in {', '.join(FIX_PROMPTS[role])}")
    return None


def _already(project: Project, prompts: dict[str, str], role: str, kind: str, latest: datetime) -> bool:
    """A constraint for this failure kind is in the current prompts, or the optimizer's proposal for it waits, or was
    rejected with no recurrence since (an owner's no is not asked again until the log has news)."""
    if any(f"{MARKER} ({kind})" in prompts.get(name, "") for name in FIX_PROMPTS[role]):
        return True
    mine = PromotionDecision.objects.filter(project=project, proposer=OPTIMIZER, expected_effect__startswith=f"{kind} ")
    return (mine.filter(state=PromotionDecision.State.PROPOSED).exists()
            or mine.filter(state=PromotionDecision.State.REJECTED, decided_at__gte=latest).exists())
