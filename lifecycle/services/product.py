"""Apply the Product Owner's and the Business Analyst's outputs: one fenced transaction each; and a reviewer's
override of the Product Owner's triage."""
from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.schemas import BusinessAnalystOutput, ProductOwnerOutput, TriageOutput
from lifecycle import step_keys
from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import Requirement, RequirementDoc, ReviewTask, StateTransition, UserStory
from lifecycle.playbooks import playbook_named, triage_playbook
from lifecycle.services.assignment import decide_refusal
from lifecycle.services.leases import Lease, step_applying
from lifecycle.services.outbox import emit
from lifecycle.services.outcomes import requirement_cancel
from lifecycle.services.reviews import review_open
from lifecycle.services.scheduling import step_schedule
from lifecycle.services.transitions import transition
from lifecycle.states import PENDING_REVIEW_STATES, RequirementState, ReviewKind

PRODUCT_OWNER = Actor.agent("product_owner")
BUSINESS_ANALYST = Actor.agent("business_analyst")
RETRIAGE_REASON_MAX_CHARS = 2000


def triage_apply(*, lease: Lease, output: TriageOutput) -> None:
    """A ticket's kind sets its playbook and clarification starts. A question is answered and an out-of-scope
    ticket refused: either ends the run (cancelled, with the reason) and leaves an event for the ticket's comment."""
    with step_applying(lease) as (step, requirement):
        if requirement.state != RequirementState.RECEIVED:  # cancelled or overridden meanwhile
            raise IllegalTransition(f"requirement is {requirement.state}: its triage no longer applies")
        playbook = triage_playbook(output.kind, repository=bool(requirement.project.repo_url),
                                   table=requirement.outcome_settings.get("playbooks"))
        _triage_audit(requirement, output, playbook=playbook, step_id=step.pk)
        if output.kind == "question":
            emit(requirement, "TicketAnswered", {**_ticket_of(requirement), "text": output.answer})
            requirement_cancel(requirement, actor=PRODUCT_OWNER, reason="answered")
            return
        if output.kind == "out_of_scope":
            emit(requirement, "TicketRefused", {**_ticket_of(requirement), "reason": output.reason})
            requirement_cancel(requirement, actor=PRODUCT_OWNER, reason=f"out of scope: {output.reason}")
            return
        requirement.playbook = playbook
        requirement.save(update_fields=["playbook"])
        emit(requirement, "TicketTriaged", {"kind": output.kind, "playbook": playbook})
        step_schedule(requirement_id=requirement.pk, key=step_keys.after_triage(repository=bool(requirement.project.repo_url)),
                      attempt=requirement.clarification_round)


def _triage_audit(requirement: Requirement, output: TriageOutput, *, playbook: str, step_id: int) -> None:
    """The triage changes no state, so its audit row is its own subject: the playbook before and after ("" when
    the ticket runs none), with the kind and the reason a reviewer checks it by."""
    StateTransition.objects.create(
        requirement=requirement, subject="triage", subject_id=str(requirement.pk), event="triage",
        from_state=requirement.playbook, to_state=playbook, actor_role=PRODUCT_OWNER.role, via=PRODUCT_OWNER.via,
        metadata={"kind": output.kind, "reason": output.reason, "step": step_id},
    )


def _ticket_of(requirement: Requirement) -> dict[str, str]:
    return {"source": requirement.ticket_source, "key": requirement.ticket_key, "url": requirement.ticket_url}


def requirement_retriage(*, requirement_id: Any, actor: Actor, playbook: str, reason: str,
                         origin: dict[str, Any] | None = None) -> Requirement:
    """A reviewer's override of the triage (or of a brief's playbook) before design or planning starts: the new
    playbook, and the Product Owner clarifies again under it (a bug fix needs acceptance criteria a feature's
    clarification may lack). Whatever waited on the old playbook (a clarification, a stories approval) expires."""
    new, reason = playbook_named(playbook).name, reason.strip()
    if not reason or len(reason) > RETRIAGE_REASON_MAX_CHARS:
        raise DomainError(f"say why the playbook changes, in 1 to {RETRIAGE_REASON_MAX_CHARS} characters", "reason")
    with transaction.atomic():
        requirement = Requirement.objects.select_for_update(of=("self",)).select_related("organization").get(
            pk=requirement_id)
        if refusal := decide_refusal(actor.user, requirement.organization, project_id=requirement.project_id):
            raise NotPermitted(refusal)
        if new == requirement.playbook:
            raise DomainError(f"it already runs the {new} playbook", "playbook")
        before = requirement.playbook
        requirement.playbook, requirement.clarification_round = new, requirement.clarification_round + 1
        transition(requirement, "retriage", actor=actor, metadata={"playbook": [before, new], "reason": reason,
                                                                   **({"origin": origin} if origin else {})})
        expired = []
        for pending in ReviewTask.objects.select_for_update().filter(requirement=requirement,
                                                                     state__in=PENDING_REVIEW_STATES):
            transition(pending, "expire", actor=actor, metadata={"reason": "the playbook changed"})
            expired.append(str(pending.pk))
        emit(requirement, "PlaybookChanged", {"from": before, "to": new, "round": requirement.clarification_round,
                                              "expired_tasks": expired})
        step_schedule(requirement_id=requirement.pk, key=step_keys.PO_CLARIFY, attempt=requirement.clarification_round)
    return requirement


def product_owner_apply(*, lease: Lease, output: ProductOwnerOutput) -> None:
    """A clear brief becomes a RequirementDoc (→ clarified); a vague one a clarification task (→ blocked)."""
    with step_applying(lease) as (step, requirement):
        if lease.attempt != requirement.clarification_round:  # a retriage started a new round under another playbook
            raise IllegalTransition(f"clarification round {lease.attempt} was replaced by round "
                                    f"{requirement.clarification_round}")
        meta = {"step": step.pk, "fence": lease.fence}
        if output.verdict == "clear":
            RequirementDoc.objects.create(
                requirement=requirement, version=requirement.clarification_round, summary=output.summary,
                objectives=output.objectives, out_of_scope=output.out_of_scope, assumptions=output.assumptions,
                constraints=output.constraints, success_metrics=output.success_metrics,
                acceptance_criteria=output.acceptance_criteria,
            )
            transition(requirement, "clarify", actor=PRODUCT_OWNER, metadata=meta)
            _hand_over(requirement, meta)
        else:
            review_open(
                requirement, kind=ReviewKind.CLARIFICATION, round=requirement.clarification_round,
                question="The brief is too vague to write a requirement from. Please answer:\n- "
                + "\n- ".join(output.clarifying_questions),
                reasoning=output.reasoning,
                context={"questions": output.clarifying_questions, "brief": requirement.brief},
                resume_target="po_clarify",
            )
            transition(requirement, "block", actor=PRODUCT_OWNER, metadata=meta)


def _hand_over(requirement: Requirement, meta: dict) -> None:
    """new_feature: the BA writes stories next. bug_fix: the clarified ticket goes straight to the Tech Lead's
    plan (clarified → design_ready, its own audited transition; the guard wants acceptance criteria)."""
    if playbook_named(requirement.playbook).writes_stories:
        emit(requirement, "RequirementClarified", {"round": requirement.story_round + 1})
        return
    transition(requirement, "accept_ticket", actor=PRODUCT_OWNER, metadata=meta)
    emit(requirement, "TicketAccepted", {"round": requirement.clarification_round})
    step_schedule(requirement_id=requirement.pk, key=step_keys.before_plan(on_repository=bool(requirement.base_sha)),
                  attempt=1)


def business_analyst_apply(*, lease: Lease, output: BusinessAnalystOutput) -> None:
    """Stories for this round (→ user_stories_created) and a stories_approval task for a human."""
    with step_applying(lease) as (step, requirement):
        stories = UserStory.objects.bulk_create(
            UserStory(requirement=requirement, round=lease.attempt, position=i, **story.model_dump())
            for i, story in enumerate(output.stories, start=1)
        )
        requirement.story_round = lease.attempt
        review_open(
            requirement, kind=ReviewKind.STORIES_APPROVAL, round=lease.attempt,
            question=f"Approve these {len(stories)} user stories (round {lease.attempt})?",
            reasoning=output.reasoning,
            context={"stories": [story.model_dump() for story in output.stories]},
            resume_target="tech_architect",
        )
        transition(requirement, "create_stories", actor=BUSINESS_ANALYST, metadata={"step": step.pk, "stories": len(stories)})
