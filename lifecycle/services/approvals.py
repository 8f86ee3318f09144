"""Actions the assistant's mutating tools ask for (ADR 36): each becomes an ActionApproval that a person approves
or rejects, unless the project pre-authorized that action type; on approval it runs through the same service a
person would use (review_decide, requirement_cancel_request), as the person who approved, so their permissions
apply and the ordinary audit records them.

An action type is exact: "cancel_requirement", or "<review kind>:<decision>" for deciding a review task
("stories_approval:approve", "step_failed:approve" to run a failed step again, "budget_exhausted:inject_constraint",
"budget_exhausted:override_budget"). A pre-authorization names one type, never a pattern, so approving stories
never covers approving a deployment ("deployment_approval:approve" must be granted by name).

Two types are also decided when their gate opens (lifecycle/services/autonomous.py): APPROVE_STORIES and
APPROVE_DEPLOYMENT (a deployment only without a hold). Every other type only lets the assistant's request run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from agents.llm.redact import typed
from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import (
    ActionApproval,
    ActionPreauthorization,
    Conversation,
    Membership,
    Project,
    Requirement,
    ReviewTask,
    ToolCall,
)
from lifecycle.services.assignment import lock_task_requirement, replay_hold
from lifecycle.services.cancellation import requirement_cancel_request
from lifecycle.services.conversations import system_note
from lifecycle.services.decisions import decision_checked, review_decide
from lifecycle.services.holds import change_hold
from lifecycle.services.outbox import emit
from lifecycle.services.story_edits import stories_version
from lifecycle.states import DECIDING_ROLES, PENDING_REVIEW_STATES, TERMINAL_STATES, Decision, ReviewKind, Role

CANCEL = "cancel_requirement"
APPROVE_STORIES = f"{ReviewKind.STORIES_APPROVAL}:{Decision.APPROVE}"
APPROVE_DEPLOYMENT = f"{ReviewKind.DEPLOYMENT_APPROVAL}:{Decision.APPROVE}"
REASON_MAX_CHARS = 2000


@dataclass(frozen=True)
class Proposed:
    """What an action would do, worked out (and checked to exist in the asker's organization) before asking."""

    action: str  # the exact type, as pre-authorizations name it
    summary: str
    project: Project | None
    arguments: dict[str, Any]
    requirement_id: Any  # the requirement it acts on (a review task's, or the one it cancels)


def action_types() -> list[tuple[str, str]]:
    """Every type a project may pre-authorize, with its label (the admin's and the API's choices)."""
    decisions = {
        ReviewKind.STORIES_APPROVAL: (Decision.APPROVE, Decision.REJECT),
        ReviewKind.DESIGN_REVIEW: (Decision.APPROVE, Decision.REQUEST_CHANGES),
        ReviewKind.CODE_REVIEW: (Decision.APPROVE, Decision.REQUEST_CHANGES),
        ReviewKind.STEP_FAILED: (Decision.APPROVE, Decision.REJECT),
        ReviewKind.ESCALATION: (Decision.APPROVE, Decision.REJECT),
        ReviewKind.BUDGET_EXHAUSTED: (Decision.APPROVE, Decision.REJECT, Decision.OVERRIDE_BUDGET,
                                      Decision.INJECT_CONSTRAINT),
        ReviewKind.DEPLOYMENT_APPROVAL: (Decision.APPROVE, Decision.REJECT),
    }
    types = [(CANCEL, "cancel a requirement")]
    for kind, options in decisions.items():
        types += [(f"{kind}:{decision}", f"{Decision(decision).label} on {ReviewKind(kind).label}") for decision in options]
    return types


def propose_review_decision(*, organization_id: Any, task_id: Any, decision: str, reason: str = "",
                            feedback: str = "", constraint: str = "",
                            budget: dict[str, Any] | None = None) -> Proposed:
    task = ReviewTask.objects.select_related("requirement").filter(pk=task_id, organization_id=organization_id).first()
    if task is None:
        raise DomainError(f"no review task {task_id} in this organization", "task_id")
    if not task.is_pending:
        raise IllegalTransition(f"review task {task_id} is already {task.state}")
    if held := replay_hold(task):  # no person may decide it: a request for it could only fail
        raise IllegalTransition(held)
    decision_checked(task, decision, reason=reason, feedback=feedback, constraint=constraint, budget=budget)
    # stories: the version the asker read with the assistant when it asked; approving the request decides on those
    version = stories_version(task)
    arguments = {"task_id": str(task.pk), "decision": decision, "reason": reason, "feedback": feedback,
                 "constraint": constraint, **({"budget": budget} if budget is not None else {}),
                 **({"stories_version": version} if version else {})}
    summary = f"{decision.replace('_', ' ')} the {task.get_kind_display().lower()} of {task.requirement}"
    return Proposed(action=f"{task.kind}:{decision}", summary=summary[:300], project=task.requirement.project,
                    arguments=arguments, requirement_id=task.requirement_id)


def propose_cancel(*, organization_id: Any, requirement_id: Any, reason: str) -> Proposed:
    requirement = Requirement.objects.select_related("project").filter(pk=requirement_id,
                                                                        organization_id=organization_id).first()
    if requirement is None:
        raise DomainError(f"no requirement {requirement_id} in this organization", "requirement_id")
    if not reason.strip():
        raise DomainError("say why it is cancelled", "reason")
    return Proposed(action=CANCEL, summary=f"cancel {requirement}"[:300], project=requirement.project,
                    arguments={"requirement_id": str(requirement.pk), "reason": reason.strip()[:REASON_MAX_CHARS]},
                    requirement_id=requirement.pk)


def approval_request(*, proposed: Proposed, asker: Any, conversation: Conversation,
                     tool_call: ToolCall | None = None) -> ActionApproval:
    """Ask for an action: pending, for a person to decide; or, when the project pre-authorized its type, run at
    once as the asker (with the asker's permissions: a pre-authorization lets the assistant act without a second
    confirmation, it grants no one a permission). It waits for a person whatever was pre-authorized when the asker
    could not decide it themselves, when it acts outside what the conversation is about (_waits), or when it is a
    deployment a hold keeps for a person (its CI workflows, the scope guard: lifecycle/services/holds.py)."""
    preauthorization = (preauthorization_for(proposed.project.pk, proposed.action)
                        if proposed.project is not None else None)
    approval = ActionApproval(
        organization_id=conversation.organization_id, project=proposed.project, conversation=conversation,
        tool_call=tool_call, action=proposed.action, arguments=typed(proposed.arguments),
        summary=typed(proposed.summary), requested_for=asker)
    with transaction.atomic():
        _lock_still_to_do(proposed)
        approval.save(force_insert=True)  # saved first: whether the asker may decide it is a lookup of the row
        waits = _waits(approval, proposed, conversation) if preauthorization is not None else ""
        if waits:
            approval.result = f"waits for a person though pre-authorized: {waits}"
            approval.save(update_fields=["result"])
        emit(None, "ActionRequested", {"approval": str(approval.pk), "action": approval.action,
                                       "conversation": str(conversation.pk)})
        if preauthorization is not None and not waits:
            approval.preauthorization = preauthorization
            _run(approval, Actor.human(asker, "assistant"), via="pre_authorized",
                 reason="pre-authorized for the project")
    approval.refresh_from_db()
    return approval


def _lock_still_to_do(proposed: Proposed) -> None:
    """Lock the requirement the action is about and refuse, under that lock, a request that could no longer do
    anything. Whatever decides a task or ends a requirement holds this lock until it commits, and
    approvals_supersede runs after that commit: a request is committed before that sweep reads, or refused here;
    none is created in between to stay pending until pressed."""
    _lock_requirement(proposed.action, proposed.arguments)
    if proposed.action == CANCEL:
        requirement = Requirement.objects.get(pk=proposed.arguments["requirement_id"])
        if requirement.state in TERMINAL_STATES:
            raise IllegalTransition(f"the requirement is already {requirement.state}")
        return
    task = ReviewTask.objects.get(pk=proposed.arguments["task_id"])
    if not task.is_pending:
        raise IllegalTransition(f"review task {task.pk} is already {task.state}")


def _lock_requirement(action: str, arguments: dict[str, Any]) -> None:
    """Lock the requirement an action is about, before its request or its task (ADR 12: the requirement first,
    the order of every writer; the action's service takes it again, in this transaction)."""
    if action == CANCEL:
        locked = Requirement.objects.select_for_update(of=("self",)).filter(pk=arguments.get("requirement_id"))
        locked.values_list("pk", flat=True).first()
    else:
        lock_task_requirement(arguments.get("task_id"))


def approval_decide(*, approval_id: Any, actor: Actor, approve: bool, reason: str = "") -> ActionApproval:
    """A person approves (the action runs as them) or rejects an action. Whoever could do the action themselves
    may decide it; a decided one is a conflict (409)."""
    asked = ActionApproval.objects.get(pk=approval_id)
    with transaction.atomic():
        _lock_requirement(asked.action, asked.arguments)
        approval = ActionApproval.objects.select_for_update().get(pk=approval_id)
        if not _may_decide(actor.user, approval):
            raise NotPermitted(f"{actor.user} may not decide actions of this kind in {approval.organization_id}")
        if approval.state != ActionApproval.State.PENDING:
            raise IllegalTransition(f"this action is already {approval.state}")
        if not approve:
            _close(approval, actor, state=ActionApproval.State.REJECTED,
                   reason=typed(reason.strip()[:REASON_MAX_CHARS]))
            return approval
        # The action runs in the decision's transaction, the request locked: a second press waits, then finds it
        # decided (409); a crash leaves it pending, never decided and not run.
        approval.decided_by, approval.decided_at = actor.user, timezone.now()
        _run(approval, actor, via=actor.via, reason=typed(reason.strip()[:REASON_MAX_CHARS]))
    approval.refresh_from_db()
    return approval


def approvals_supersede(requirement_id: Any) -> int:
    """Close as superseded the requirement's pending requests that can no longer do anything: a review decision
    whose task was decided another way or expired, a cancel of a requirement that ended. Their Slack buttons go
    (ActionDecided) and their conversation says why. Idempotent; returns how many it closed."""
    requirement = Requirement.objects.filter(pk=requirement_id).first()
    if requirement is None:
        return 0
    settled = {str(task.pk): task for task in ReviewTask.objects.select_related("decided_by").filter(
        requirement_id=requirement_id).exclude(state__in=PENDING_REVIEW_STATES)}
    ended = requirement.state in TERMINAL_STATES
    mine = Q(arguments__task_id__in=list(settled)) | Q(action=CANCEL, arguments__requirement_id=str(requirement_id))
    closed = 0
    with transaction.atomic():
        for approval in ActionApproval.objects.select_for_update().filter(
                mine, organization_id=requirement.organization_id, state=ActionApproval.State.PENDING):
            task = settled.get(str(approval.arguments.get("task_id")))
            if approval.action == CANCEL and ended:
                approval.result = f"not needed: the requirement is already {requirement.get_state_display().lower()}"
            elif task is not None and approval.action != CANCEL:
                approval.result = f"not needed: the review task was {_settled(task)}"
            else:
                continue
            _close(approval, Actor.system("superseded"), state=ActionApproval.State.SUPERSEDED, reason="")
            closed += 1
    return closed


def _settled(task: ReviewTask) -> str:
    if not task.decision:
        return f"closed as {task.get_state_display().lower()}"
    who = getattr(task.decided_by, "username", "") or task.decided_by_policy or "someone"
    return f"decided another way: {task.get_decision_display().lower()} by {who}"


def preauthorization_for(project_id: Any, action: str) -> ActionPreauthorization | None:
    """The project's pre-authorization of exactly `action`, if its admins granted one."""
    return ActionPreauthorization.objects.select_related("granted_by").filter(project_id=project_id,
                                                                               action=action).first()


def preauthorize(*, project: Project, action: str, actor: Actor) -> ActionPreauthorization:
    """A project admin lets an action type run without a second confirmation; only the organization's admins
    may."""
    if action not in dict(action_types()):
        raise DomainError(f"no action type {action!r}", "action")
    ensure_project_admin(actor.user, project)
    grant, _ = ActionPreauthorization.objects.get_or_create(project=project, action=action,
                                                            defaults={"granted_by": actor.user})
    return grant


def preauthorization_revoke(*, project: Project, action: str, actor: Actor) -> bool:
    """A project admin withdraws a pre-authorization (True when there was one); the approvals it let run keep
    `decided_via` "pre_authorized", and the gates it decided keep their transition's record."""
    ensure_project_admin(actor.user, project)
    deleted, _ = ActionPreauthorization.objects.filter(project=project, action=action).delete()
    return bool(deleted)


def ensure_project_admin(user: Any, project: Project) -> None:
    """Only the admins of the project's organization grant or withdraw its pre-authorizations."""
    if not Membership.objects.filter(user=user, organization_id=project.organization_id, role=Role.ADMIN).exists():
        raise NotPermitted(f"{user} is not an admin of {project.organization}: only its admins pre-authorize actions")


def _may_decide(user: Any, approval: ActionApproval) -> bool:
    """Whether `user` may decide this (saved) request, whatever its state: a lookup in _decidable, the one rule."""
    return user is not None and ActionApproval.objects.filter(_decidable(user), pk=approval.pk).exists()


def _waits(approval: ActionApproval, proposed: Proposed, conversation: Conversation) -> str:
    """Why a pre-authorized request still waits for a person, or "". A pre-authorization saves the asker a second
    confirmation of what they may do themselves: it does not decide for someone who may not (that is a reviewer's
    request to decide). And the model's words come from untrusted text (a brief, a ticket, a tool's result), which
    may name any requirement of the organization: only what the conversation is about runs at once."""
    if not _may_decide(approval.requested_for, approval):
        return f"{approval.requested_for} may not decide it themselves"
    if conversation.requirement_id is None or str(conversation.requirement_id) != str(proposed.requirement_id):
        return "it acts outside what this conversation is about"
    if proposed.action == APPROVE_DEPLOYMENT:
        return change_hold(ReviewTask.objects.get(pk=proposed.arguments["task_id"]))
    return ""


def _run(approval: ActionApproval, actor: Actor, *, via: str, reason: str) -> None:
    """Run the approved action through its service, as `actor`, in the caller's transaction (the request locked or
    just created); record what came of it. A refusal by the service (not permitted, already decided, bad input)
    rolls back its own savepoint and is recorded as the action's failure, not raised: the decision stands."""
    args = approval.arguments
    # the texts it records (a reason, feedback, a constraint, new limits) are the assistant's words, let stand
    origin = {"approval": str(approval.pk), "proposed_by": "assistant",
              "approved_by": getattr(actor.user, "username", ""), "via": via}
    try:
        if approval.action == CANCEL:
            requirement_cancel_request(requirement_id=args["requirement_id"], actor=actor, reason=args["reason"],
                                       origin=origin)
            result = "cancelled"
        else:
            task = review_decide(task_id=args["task_id"], actor=actor, decision=args["decision"],
                                 reason=args.get("reason", ""), feedback=args.get("feedback", ""),
                                 constraint=args.get("constraint", ""), budget=args.get("budget"), origin=origin,
                                 stories_version=args.get("stories_version"))
            result = f"review task decided: {task.decision}"
        state = ActionApproval.State.DONE
    except (DomainError, IllegalTransition, NotPermitted, Requirement.DoesNotExist, ReviewTask.DoesNotExist) as exc:
        result, state = f"not done: {exc}", ActionApproval.State.FAILED
    approval.result = result
    _close(approval, actor, state=state, reason=reason, via=via)


def _close(approval: ActionApproval, actor: Actor, *, state: str, reason: str, via: str = "") -> None:
    approval.state = state
    approval.decided_by = approval.decided_by or actor.user
    approval.decided_via = via or actor.via
    approval.decided_at = approval.decided_at or timezone.now()
    approval.reason = reason
    approval.save()
    emit(None, "ActionDecided", {"approval": str(approval.pk), "action": approval.action, "state": state,
                                 "conversation": str(approval.conversation_id or "")})
    if approval.conversation_id:
        system_note(approval.conversation_id, _note(approval))


def _note(approval: ActionApproval) -> str:
    who = getattr(approval.decided_by, "username", "") or "someone"
    if approval.state == ActionApproval.State.SUPERSEDED:
        return f"{approval.summary}: no longer asked, {approval.result}"
    if approval.state == ActionApproval.State.REJECTED:
        return f"{who} rejected: {approval.summary}" + (f" ({approval.reason})" if approval.reason else "")
    how = "pre-authorized for this project, run" if approval.preauthorization_id else f"approved by {who}"
    return f"{approval.summary}: {how}; {approval.result}"


def approvals_visible_to(user: Any) -> QuerySet[ActionApproval]:
    """The requests of the user's organizations that are theirs to see: asked in a conversation they take part in,
    of a kind their role decides (a reviewer's or an admin's), or the cancel of a requirement they submitted (theirs
    to withdraw, as the cancel service allows); others' are 404, as other organizations' are."""
    deciders = Membership.objects.filter(user=user, role__in=DECIDING_ROLES).values("organization_id")
    members = Membership.objects.filter(user=user).values("organization_id")
    submitted = [str(pk) for pk in Requirement.objects.filter(submitted_by=user, organization_id__in=members)
                 .values_list("pk", flat=True)]
    mine = (Q(conversation__participants__user=user) | Q(requested_for=user) | Q(organization_id__in=deciders)
            | Q(action=CANCEL, arguments__requirement_id__in=submitted))
    return ActionApproval.objects.filter(mine, organization_id__in=members).distinct()


def approvals_to_decide(user: Any) -> QuerySet[ActionApproval]:
    """The pending requests the user may decide, newest first: the API's list, paged over every one of them (one
    query, so that a count and a page hold only these)."""
    return ActionApproval.objects.filter(_decidable(user), state=ActionApproval.State.PENDING).select_related(
        "requested_for", "decided_by").order_by("-created_at", "-pk")


def _decidable(user: Any) -> Q:
    """Who may decide a request, as a filter of requests, in any state: a reviewer or an admin of its organization
    (a reviewer not on a project whose reviewers group they are not in, as decide_refusal says), or the submitter
    withdrawing their own requirement (as the cancel service allows). approvals_to_decide lists these and
    _may_decide looks one up here, so the rule stands once."""
    members = Membership.objects.filter(user=user).values("organization_id")
    return (_decided_by_role(user) | _withdrawn_by_submitter(user, members)) & Q(organization_id__in=members)


def _decided_by_role(user: Any) -> Q:
    """A request of an organization where the user is a reviewer or an admin, except, for a reviewer, on a project
    whose reviewers group they are not in (decide_refusal)."""
    roles = dict(Membership.objects.filter(user=user, role__in=DECIDING_ROLES).values_list("organization_id", "role"))
    groups = set(user.groups.values_list("name", flat=True))
    narrowed = Project.objects.filter(organization_id__in=[org for org, role in roles.items() if role != Role.ADMIN])
    closed = [pk for pk, group in narrowed.values_list("pk", "settings__reviewers_group")
              if str(group or "") and str(group or "") not in groups]  # read as assignment.reviewers_group reads it
    return Q(organization_id__in=list(roles)) & ~Q(project_id__in=closed)


def _withdrawn_by_submitter(user: Any, members: QuerySet) -> Q:
    """The cancel of a requirement the user submitted, in that requirement's organization."""
    submitted: dict[Any, list[str]] = {}
    for organization_id, pk in Requirement.objects.filter(submitted_by=user, organization_id__in=members).values_list(
            "organization_id", "pk"):
        submitted.setdefault(organization_id, []).append(str(pk))
    withdraws = Q(pk__in=[])
    for organization_id, ids in submitted.items():
        withdraws |= Q(action=CANCEL, organization_id=organization_id, arguments__requirement_id__in=ids)
    return withdraws


def may_decide(user: Any, approval: ActionApproval) -> bool:
    return approval.state == ActionApproval.State.PENDING and _may_decide(user, approval)
