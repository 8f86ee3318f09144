"""The promotion protocol (ADR 39): a project's prompt bundle, budget profile and playbook table change only through
a PromotionDecision. A proposal carries the structured change and the evidence (the same suite run with the current
version and with the candidate); the project's owners (its organization's admins) accept it, accept it modified or
reject it, with a reason; only then does the version become current, for requirements submitted after (a running
requirement keeps the prompt bundle and settings it was pinned to at submission). One action rolls a decision back
to the version before it. The project settings hold what is current; the decisions are its history.
"""
from __future__ import annotations

import difflib
import hashlib
import json
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, Q, QuerySet
from django.utils import timezone

from agents.prompts import bundle_hash, prompt_files
from lifecycle import budget_limits, playbooks
from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted, echoed_names
from lifecycle.models import EvalRun, Membership, MetaKind, Project, PromotedArtifact, PromotionDecision, PromptBundle
from lifecycle.models.evals import EVALUATION_ORGANIZATION
from lifecycle.services.meta_eval import meta_log
from lifecycle.services.outbox import emit
from lifecycle.services.prompts import project_bundle
from lifecycle.states import Role

ACCEPT, MODIFY, REJECT = "accept", "modify", "reject"
DECISIONS = {ACCEPT: PromotionDecision.State.ACCEPTED, MODIFY: PromotionDecision.State.MODIFIED,
             REJECT: PromotionDecision.State.REJECTED}
OPTIMIZER = "optimizer"
REASON_MAX_CHARS = 2000
GUARDED = tuple(PromotedArtifact.values)  # the project settings only a promotion changes


# --- versions --------------------------------------------------------------------------------------------------------
def current_version(project: Project, artifact: str) -> tuple[Any, str]:
    """The version new requirements of the project start with now, and its content hash. A prompt bundle's version
    is its sha256 (the prompts pinned in the project's settings, or the shipped files when none are: a prompt file
    added later does not change a pinned version); a profile's or table's is its value ({}: the defaults)."""
    if artifact == PromotedArtifact.PROMPTS:
        sha = project_bundle(project, drop_unknown=True).sha256
        return sha, sha
    value = (project.settings or {}).get(artifact) or {}
    return value, value_hash(value)


def value_hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def version_of(artifact: str, value: Any) -> str:
    return value if artifact == PromotedArtifact.PROMPTS else value_hash(value)


def candidate_problems(artifact: str, value: Any) -> list[str]:
    """What is wrong with a version as the project's (each a sentence an owner or API client can act on)."""
    if artifact == PromotedArtifact.PROMPTS:
        bundle = PromptBundle.objects.filter(sha256=value).first() if isinstance(value, str) else None
        if bundle is None:
            return [f"no prompt bundle {value!r}: make one with `aiteam_promote propose --prompt NAME=FILE`"]
        unknown = sorted(set(bundle.prompts) - set(prompt_files()))
        return [f"the bundle has prompts this deployment does not: {', '.join(unknown)}"] if unknown else []
    if artifact == PromotedArtifact.BUDGETS:
        return budget_limits.problems(value)
    if artifact == PromotedArtifact.PLAYBOOKS:
        return playbooks.table_problems(value)
    return [f"unknown artifact {artifact!r}; use one of {', '.join(PromotedArtifact.values)}"]


def bundle_with(project: Project, changed: dict[str, str]) -> PromptBundle:
    """The project's current bundle with some prompts replaced: a candidate version of its prompts."""
    unknown = sorted(set(changed) - set(prompt_files()))
    if unknown or not all(isinstance(text, str) and text.strip() for text in changed.values()):
        raise DomainError(f"a candidate's prompts must be non-empty texts of known prompts; unknown: [{echoed_names(unknown)}]",
                          "candidate")
    prompts = {**project_bundle(project, drop_unknown=True).prompts, **changed}
    bundle, _ = PromptBundle.objects.get_or_create(sha256=bundle_hash(prompts), defaults={"prompts": prompts})
    return bundle


def change_between(artifact: str, before: Any, after: Any) -> list[dict[str, Any]]:
    """The structured change: per prompt that differs, a unified diff; per value that differs, its path, from, to."""
    if artifact == PromotedArtifact.PROMPTS:
        old, new = (PromptBundle.objects.get(sha256=sha).prompts for sha in (before, after))
        return [{"prompt": name, "diff": "".join(difflib.unified_diff(
                    old.get(name, "").splitlines(keepends=True), new.get(name, "").splitlines(keepends=True),
                    fromfile=f"a/{name}.md", tofile=f"b/{name}.md"))}
                for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]
    old_values, new_values = dict(_leaves(before)), dict(_leaves(after))
    changes = []
    for path in sorted(set(old_values) | set(new_values)):
        if path in old_values and path in new_values and old_values[path] == new_values[path]:
            continue
        # a side without the key is left out (the default applies); a null is kept (in a budget: unlimited)
        changes.append({"path": path, **({"from": old_values[path]} if path in old_values else {}),
                        **({"to": new_values[path]} if path in new_values else {})})
    return changes


def _leaves(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, f"{prefix}.{key}" if prefix else key)]
    return [(prefix, value)]


def guarded_settings_problems(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """A settings edit may not change what only a promotion changes (the admin form and every other writer ask)."""
    return [f'settings["{key}"] is changed only by a promotion (docs/promotions.md): propose it, its owner decides'
            for key in GUARDED if (before or {}).get(key) != (after or {}).get(key)]


def project_settings_save(project: Project, update_fields: list[str] | None = None) -> None:
    """Save a project edited elsewhere (the admin form, `aiteam_ticket`) with its promoted versions as they are in
    the database now: a promotion decided while the edit was open is kept, not overwritten by the stale copy."""
    with transaction.atomic():
        if project.pk and (stored := Project.objects.select_for_update().filter(pk=project.pk).first()):
            kept = {key: value for key, value in (project.settings or {}).items() if key not in GUARDED}
            project.settings = {**kept, **{key: stored.settings[key] for key in GUARDED if key in stored.settings}}
        project.save(update_fields=update_fields)


# --- who -------------------------------------------------------------------------------------------------------------
def is_owner(user: Any, project: Project) -> bool:
    """A project's prompts, budgets and playbooks are owned by its organization's admins (and operators)."""
    return bool(user and user.is_authenticated and user.is_active) and (
        user.is_superuser or Membership.objects.filter(user=user, organization_id=project.organization_id,
                                                       role=Role.ADMIN).exists())


def eval_runs_visible_to(user: Any) -> QuerySet[EvalRun]:
    """An organization's runs (of its versions) are its members'; the operators' runs a member's of the shared
    evaluation organization (the staff dashboard's rule); a superuser reads all. A proposal may cite only runs its
    proposer can read."""
    if user.is_superuser:
        return EvalRun.objects.all()
    shared = Exists(Membership.objects.filter(user=user, organization__slug=EVALUATION_ORGANIZATION))
    return EvalRun.objects.filter(Q(organization__in=Membership.objects.filter(user=user).values("organization"))
                                  | Q(shared, organization=None))


def promotions_visible_to(user: Any) -> QuerySet[PromotionDecision]:
    rows = PromotionDecision.objects.select_related("project__organization", "proposed_by", "decided_by")
    return rows if user.is_superuser else rows.filter(project__organization__memberships__user=user)


def promotions_to_decide(user: Any) -> QuerySet[PromotionDecision]:
    """The open proposals the person owns: the review inbox counts them."""
    rows = PromotionDecision.objects.filter(state=PromotionDecision.State.PROPOSED)
    if user.is_superuser:
        return rows
    return rows.filter(project__organization__memberships__user=user,
                       project__organization__memberships__role=Role.ADMIN)


# --- proposing -------------------------------------------------------------------------------------------------------
def promotion_propose(*, project: Project, artifact: str, candidate: Any, current_run: EvalRun,
                      candidate_run: EvalRun, actor: Actor, expected_effect: str, justification: str = ""
                      ) -> PromotionDecision:
    """A proposal to its owners. The evidence must be the same suite, run the same way (both offline or both live),
    once with the current version and once with the candidate, everything else equal."""
    proposal_check(project, artifact, candidate, actor, expected_effect)
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project.pk)  # no decision changes the version meanwhile
        current, current_sha = proposal_check(project, artifact, candidate, actor, expected_effect)
        candidate_sha = version_of(artifact, candidate)
        if problems := evidence_problems(artifact, current_run, current, candidate_run, candidate,
                                         organization_id=project.organization_id):
            raise DomainError("; ".join(problems), "candidate_run")
        try:
            with transaction.atomic():  # the unique index promotion_one_open_per_candidate backs the check above
                decision = PromotionDecision.objects.create(
                    project=project, artifact=artifact, current=current, current_version=current_sha,
                    candidate=candidate, candidate_version=candidate_sha,
                    change=change_between(artifact, current, candidate), current_run=current_run,
                    candidate_run=candidate_run, expected_effect=expected_effect.strip(),
                    justification=justification.strip(), proposer="person" if actor.is_human else OPTIMIZER,
                    proposed_by=actor.user if actor.is_human else None)
        except IntegrityError:
            if waiting := open_proposal(project, artifact, candidate_sha, current_sha):
                raise _proposed_already(waiting) from None
            raise
        emit(None, "PromotionProposed", _event(decision))
    return decision


def promotion_propose_prompts(*, project: Project, changed: dict[str, str], current_run: EvalRun,
                              candidate_run: EvalRun, actor: Actor, expected_effect: str, justification: str = ""
                              ) -> PromotionDecision:
    """A proposal of the project's prompts with `changed` replaced, over runs made already (the API's case): the
    candidate bundle is written in the proposal's transaction, so a refused proposal leaves no bundle behind."""
    with transaction.atomic():
        return promotion_propose(project=project, artifact=PromotedArtifact.PROMPTS,
                                 candidate=bundle_with(project, changed).pk, current_run=current_run,
                                 candidate_run=candidate_run, actor=actor, expected_effect=expected_effect,
                                 justification=justification)


def proposal_check(project: Project, artifact: str, candidate: Any, actor: Actor,
                   expected_effect: str) -> tuple[Any, str]:
    """Who may propose, a valid candidate that changes something, an expected effect, no open proposal of the same
    candidate (409): asked before any evaluation is run for a proposal, and again as it is recorded, under the
    project's lock (so of two proposals at once, one is refused). Returns the current version and its hash."""
    if actor.is_human and not Membership.objects.filter(user=actor.user, organization_id=project.organization_id
                                                        ).exists():
        raise NotPermitted("only a member of the project's organization proposes a change to it")
    if not actor.is_human and actor.role != OPTIMIZER:
        raise NotPermitted("a promotion is proposed by a person or the optimizer")
    if problems := candidate_problems(artifact, candidate):
        raise DomainError("; ".join(problems), "candidate")
    if not expected_effect.strip():
        raise DomainError("say what the change is expected to do (fewer fix loops, hidden tests passing, …)",
                          "expected_effect")
    current, current_sha = current_version(project, artifact)
    candidate_sha = version_of(artifact, candidate)
    if candidate_sha == current_sha:
        raise DomainError("the candidate is the current version: nothing would change", "candidate")
    if waiting := open_proposal(project, artifact, candidate_sha, current_sha):
        raise _proposed_already(waiting)
    return current, current_sha


def _proposed_already(waiting: PromotionDecision) -> IllegalTransition:
    return IllegalTransition(
        f"promotion {waiting.pk} proposes this {PromotedArtifact(waiting.artifact).label} already (by "
        f"{waiting.proposer_name}, {waiting.created_at:%Y-%m-%d %H:%M %Z}) and waits for the project's owners: a "
        "second proposal of it is refused until they decide that one")


def open_proposal(project: Project, artifact: str, candidate: str, against: str) -> PromotionDecision | None:
    """The proposal of this candidate version, measured against this current version, that waits for the project's
    owners. One measured against an older version does not count: it closes as superseded when decided."""
    return PromotionDecision.objects.filter(
        project=project, artifact=artifact, candidate_version=candidate, current_version=against,
        state=PromotionDecision.State.PROPOSED).select_related("proposed_by").order_by("created_at").first()


def evidence_problems(artifact: str, current_run: EvalRun, current: Any, candidate_run: EvalRun,
                      candidate: Any, *, organization_id: Any = None) -> list[str]:
    """Why the two runs do not justify this change to a project of `organization_id`, if they do not."""
    found = [problem for run in (current_run, candidate_run) for problem in run_problems(run)]
    found += [f"eval run {run.pk} measured another organization's versions" for run in (current_run, candidate_run)
              if run.organization_id not in (None, organization_id)]
    if current_run.pk == candidate_run.pk:
        found.append("the two eval runs are the same run")
    if current_run.suite != candidate_run.suite:
        found.append(f"the runs are of different suites ({current_run.suite}, {candidate_run.suite})")
    if current_run.live != candidate_run.live:
        found.append("one run is live and the other offline")
    for run, value, which in ((current_run, current, "current"), (candidate_run, candidate, "candidate")):
        if run_version(run, artifact) != version_of(artifact, value):
            found.append(f"eval run {run.pk} did not run the {which} {PromotedArtifact(artifact).label}")
    for other in PromotedArtifact.values:
        if other != artifact and run_version(current_run, other) != run_version(candidate_run, other):
            found.append(f"the runs differ in their {PromotedArtifact(other).label} too: change one thing at a time")
    return found


def run_problems(run: EvalRun) -> list[str]:
    """Why one run measures nothing: it did not finish, has no case, or some of its cases broke (the machinery
    failed, not the version: `aiteam_eval run` exits 1 on such a run)."""
    if run.finished_at is None:
        return [f"eval run {run.pk} has not finished"]
    cases = list(run.cases.all())
    broke = [f"{case.name} ({case.error or case.hidden_error})" for case in cases if case.broke]
    if not cases:
        return [f"eval run {run.pk} has no case"]
    return [f"eval run {run.pk}: {len(broke)} of {len(cases)} case(s) broke, so it measures nothing of the version: "
            f"{'; '.join(broke)[:500]}; fix what broke and run it again"] if broke else []


def run_version(run: EvalRun, artifact: str) -> str:
    if artifact == PromotedArtifact.PROMPTS:
        return run.bundle_id or ""
    return value_hash(run.settings.get(artifact) or {})


# --- deciding --------------------------------------------------------------------------------------------------------
def promotion_decide(*, decision_id: Any, actor: Actor, decision: str, reason: str,
                     modified: Any = None) -> PromotionDecision:
    """The owner's decision. Accepting (as proposed or modified) makes the version current for new requirements and
    closes the project's other open proposals for the artifact (they were measured against the old version)."""
    if decision not in DECISIONS:
        raise DomainError(f"decide with one of {', '.join(DECISIONS)}", "decision")
    reason = _reason(reason)
    with transaction.atomic():
        project, row = _locked(decision_id, actor)
        if not row.is_open:
            raise IllegalTransition(f"this promotion is {row.state}: it was decided already")
        stale = decision != REJECT and current_version(project, row.artifact)[1] != row.current_version
        if stale:  # measured against a version no longer current (a deployment changed the shipped prompts):
            # closed, so it waits for no one; the 409 after the commit says why
            row.state, row.reason = PromotionDecision.State.SUPERSEDED, "superseded: the current version changed"
            row.save(update_fields=["state", "reason"])
        else:
            _decide(project, row, actor, decision, reason, modified)
    if stale:
        raise IllegalTransition("the current version changed since this was proposed: it is closed as superseded; "
                                "propose it again against the current version")
    return row


def _decide(project: Project, row: PromotionDecision, actor: Actor, decision: str, reason: str,
            modified: Any) -> None:
    adopted = row.candidate
    if decision == ACCEPT and row.artifact == PromotedArtifact.BUDGETS and (found := candidate_problems(
            row.artifact, adopted)):  # proposed before limits were bounded: modify it instead
        raise DomainError("the candidate cannot be adopted as it is: " + "; ".join(found), "candidate")
    if decision == MODIFY:
        adopted = _modified(row, project, modified)
        row.adopted_change = change_between(row.artifact, row.candidate, adopted)
    if decision != REJECT:
        row.adopted, row.adopted_version = adopted, version_of(row.artifact, adopted)
        _make_current(project, row.artifact, adopted)
    row.state = DECISIONS[decision]
    _decided(row, actor, reason)
    if decision != REJECT:
        _supersede_others(row)
    _logged(project, row, row.state)
    emit(None, "PromotionDecided", _event(row))


def _logged(project: Project, row: PromotionDecision, decision: str) -> None:
    """The meta-evaluation log's promotion entry (its acceptance rate), in the decision's transaction."""
    meta_log(MetaKind.PROMOTION, organization=project.organization, project=project, key=f"promotion:{row.pk}",
             data={"decision": decision, "artifact": row.artifact, "promotion": str(row.pk),
                   "proposer": row.proposer, "version": row.adopted_version or row.candidate_version})


def promotion_rollback(*, decision_id: Any, actor: Actor, reason: str) -> PromotionDecision:
    """One action: the version before an adopted decision becomes current again, recorded as a decision of its own
    (so the history says who rolled back what, when and why)."""
    reason = _reason(reason)
    with transaction.atomic():
        project, row = _locked(decision_id, actor)
        if row.adopted is None:
            raise IllegalTransition(f"this {row.kind} is {row.state}: it changed nothing to roll back")
        current, current_sha = current_version(project, row.artifact)
        if current_sha == row.current_version:
            raise IllegalTransition("the version before it is the current version already")
        if problems := candidate_problems(row.artifact, row.current):
            raise IllegalTransition("that version cannot be restored: " + "; ".join(problems))
        rollback = PromotionDecision(
            project=project, artifact=row.artifact, kind=PromotionDecision.Kind.ROLLBACK,
            state=PromotionDecision.State.ACCEPTED, current=current, current_version=current_sha,
            candidate=row.current, candidate_version=row.current_version,
            change=change_between(row.artifact, current, row.current), adopted=row.current,
            adopted_version=row.current_version, proposer="person", proposed_by=actor.user, rollback_of=row,
            expected_effect=f"the version before {row.kind} {row.pk} is current again")
        _decided(rollback, actor, reason)
        _make_current(project, row.artifact, row.current)
        _supersede_others(rollback)
        _logged(project, rollback, "rolled_back")
        emit(None, "PromotionDecided", _event(rollback))
    return rollback


def _locked(decision_id: Any, actor: Actor) -> tuple[Project, PromotionDecision]:
    """The project, then the decision, locked in that order (every writer of a project's versions takes the project
    first, so two decisions on one project wait for each other instead of deadlocking)."""
    project_id = (promotions_visible_to(actor.user).filter(pk=decision_id).values_list("project_id", flat=True).first()
                  if actor.is_human else None)
    if project_id is None:
        raise PromotionDecision.DoesNotExist(f"no promotion {decision_id} in your organizations")
    project = Project.objects.select_for_update().get(pk=project_id)
    if not is_owner(actor.user, project):
        raise NotPermitted("only the project's owners (its organization's admins) decide its promotions")
    return project, PromotionDecision.objects.select_for_update().get(pk=decision_id)


def _reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise DomainError("give the reason for the decision", "reason")
    if len(reason) > REASON_MAX_CHARS:
        raise DomainError(f"at most {REASON_MAX_CHARS} characters", "reason")
    return reason


def _modified(row: PromotionDecision, project: Project, modified: Any) -> Any:
    """The owner's version: for prompts, the candidate's prompts with theirs replaced (name → text); for a profile or
    table, the whole value."""
    if modified is None:
        raise DomainError("a modification gives the changed version", "modified")
    if row.artifact == PromotedArtifact.PROMPTS:
        if not isinstance(modified, dict) or not modified:
            raise DomainError("a modified prompt bundle is an object of prompt name → text", "modified")
        base = PromptBundle.objects.get(sha256=row.candidate).prompts
        unknown = sorted(set(modified) - set(base))
        if unknown or not all(isinstance(text, str) and text.strip() for text in modified.values()):
            raise DomainError(f"modify known prompts with non-empty texts; unknown: [{echoed_names(unknown)}]", "modified")
        prompts = {**base, **modified}
        modified = PromptBundle.objects.get_or_create(sha256=bundle_hash(prompts), defaults={"prompts": prompts})[0].pk
    elif problems := candidate_problems(row.artifact, modified):
        raise DomainError("; ".join(problems), "modified")
    if version_of(row.artifact, modified) in (row.candidate_version, row.current_version):
        raise DomainError("the modification is the candidate or the current version: accept or reject instead",
                          "modified")
    return modified


def _make_current(project: Project, artifact: str, value: Any) -> None:
    """A prompt bundle is pinned whole (every prompt's text), so a deployment's prompt files no longer change it."""
    settings = dict(project.settings or {})
    if artifact == PromotedArtifact.PROMPTS:
        settings[artifact] = PromptBundle.objects.get(sha256=value).prompts
    elif value:
        settings[artifact] = value
    else:
        settings.pop(artifact, None)
    project.settings = settings
    project.save(update_fields=["settings"])


def _decided(row: PromotionDecision, actor: Actor, reason: str) -> None:
    row.decided_by, row.decided_via, row.decided_at, row.reason = actor.user, actor.via, timezone.now(), reason
    row.save()


def _supersede_others(row: PromotionDecision) -> None:
    PromotionDecision.objects.filter(project_id=row.project_id, artifact=row.artifact,
                                     state=PromotionDecision.State.PROPOSED).exclude(pk=row.pk).update(
        state=PromotionDecision.State.SUPERSEDED, reason=f"superseded: {row.kind} {row.pk} changed the version first")


def _event(row: PromotionDecision) -> dict[str, Any]:
    return {"promotion": str(row.pk), "project": str(row.project_id), "artifact": row.artifact, "kind": row.kind,
            "state": row.state, "proposer": row.proposer}


# --- evidence, side by side --------------------------------------------------------------------------------------------
def versions_history(project: Project, artifact: str) -> QuerySet[PromotionDecision]:
    """Every decision that made a version current, newest first."""
    return PromotionDecision.objects.filter(project=project, artifact=artifact, adopted__isnull=False).order_by(
        "-decided_at")
