"""A proposal with its evidence: the suite run once with a project's current version and once with the candidate,
everything else equal, then the PromotionDecision for its owners (ADR 39). Used by `aiteam_promote` for a person's
candidate and by the optimizer for its drafts."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from lifecycle.actors import Actor
from lifecycle.errors import DomainError
from lifecycle.evals.running import eval_run_cases, eval_run_start
from lifecycle.evals.suites import load_suite
from lifecycle.models import Project, PromotedArtifact, PromotionDecision, PromptBundle
from lifecycle.services.promotions import (
    current_version,
    promotion_propose,
    proposal_check,
    run_problems,
)

log = logging.getLogger("aiteam.progress")


def evaluate_and_propose(*, project: Project, artifact: str, candidate: Any, suite: str, actor: Actor,
                         expected_effect: str, justification: str = "", live: bool = False,
                         progress: Callable[[str], None] = log.info) -> PromotionDecision:
    """Both runs, then the proposal; a candidate that is invalid or the current version is refused before any run,
    and a run with a case that broke (or no case) stops there, with no proposal."""
    current, _ = proposal_check(project, artifact, candidate, actor, expected_effect)  # before runs that may cost
    cases = load_suite(suite)
    runs = []
    for which, value in (("current", current), ("candidate", candidate)):
        bundle, profile = _versions(project, artifact, value)
        run = eval_run_start(suite=suite, bundle=bundle, live=live, profile=profile, organization=project.organization)
        progress(f"eval run {run.pk}: the {which} {PromotedArtifact(artifact).label} on suite {suite}")
        eval_run_cases(run, cases, progress=progress)
        if problems := run_problems(run):  # no proposal on evidence that measured nothing (nor a second run)
            raise DomainError("; ".join(problems), "current_run" if which == "current" else "candidate_run")
        runs.append(run)
    return promotion_propose(project=project, artifact=artifact, candidate=candidate, current_run=runs[0],
                             candidate_run=runs[1], actor=actor, expected_effect=expected_effect,
                             justification=justification)


def _versions(project: Project, artifact: str, value: Any) -> tuple[PromptBundle, dict[str, Any]]:
    """The prompt bundle and profile a run uses: the project's current ones, with `artifact` set to `value`."""
    bundle = PromptBundle.objects.get(sha256=value if artifact == PromotedArtifact.PROMPTS
                                      else current_version(project, PromotedArtifact.PROMPTS)[0])
    profile = {key: value if key == artifact else current_version(project, key)[0]
               for key in (PromotedArtifact.BUDGETS, PromotedArtifact.PLAYBOOKS)}
    return bundle, profile
