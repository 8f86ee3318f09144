"""Who works on a review task (claim, unassign, assign to a user or a group) and who may decide it.

The permission to decide is the reviewer (or admin) role in the task's organization; a
project may narrow it to one Django group with settings["reviewers_group"] (the
organization's admins stay allowed). Claiming and assigning need the same permission as
deciding, and whoever is assigned must hold it too. Every change is a transition of the
task (audited with where it came from) and an outbox event (notifications).
"""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import Membership, Project, Requirement, ReviewTask
from lifecycle.services.outbox import emit
from lifecycle.services.transitions import transition
from lifecycle.states import DECIDING_ROLES, Role


def decide_refusal(user: Any, organization: Any, *, project_id: Any = None) -> str:
    """Why `user` may not decide the organization's (and project's) review tasks; "" when they may."""
    role = Membership.objects.filter(user=user, organization=organization).values_list("role", flat=True).first()
    if role not in DECIDING_ROLES:
        return f"{user} has no reviewer role in {organization} and may not decide its review tasks"
    group = reviewers_group(project_id)
    if group and role != Role.ADMIN and not user.groups.filter(name=group).exists():
        return f"{user} is not in '{group}', the group that decides this project's review tasks"
    return ""


def replay_hold(task: ReviewTask) -> str:
    """Why no person decides, claims or is given this task, or "": a replay's gates get only the source run's
    recorded decisions (the `replay` policy, lifecycle/replay/runs.py); one the source never decided is held open as
    a record of where the source waited, nobody's work (ReviewTaskQuerySet.of_real_runs)."""
    if not task.requirement.replay_of_id:
        return ""
    return ("held: this is a replay's gate, decided only as its source run's was; one the source never decided "
            "stays open as a record, for nobody to decide")


def reviewers_group(project_id: Any) -> str:
    if project_id is None:
        return ""
    project_settings = Project.objects.filter(pk=project_id).values_list("settings", flat=True).first() or {}
    return str(project_settings.get("reviewers_group") or "")


def ensure_may_review(user: Any, task: ReviewTask) -> None:
    refusal = decide_refusal(user, task.organization, project_id=task.requirement.project_id)
    if refusal:
        raise NotPermitted(refusal)


def review_claim(*, task_id: Any, actor: Actor, origin: dict[str, Any] | None = None) -> ReviewTask:
    """Take a task to work on. Claiming a task someone else holds is refused: unassign it or assign it instead."""
    with transaction.atomic():
        task = _locked(task_id, actor.user)
        if task.assignee_id == actor.user.pk:
            return task
        if task.assignee_id is not None:
            raise IllegalTransition(f"{task.assignee} is working on this task; unassign it first")
        task.assignee, task.assignee_group = actor.user, None
        transition(task, "claim", actor=actor, metadata=_meta(origin, assignee=actor.user.username))
        emit(task.requirement, "ReviewTaskAssigned", {"review_task": str(task.pk), "by": actor.user.pk})
    return task


def review_unassign(*, task_id: Any, actor: Actor, origin: dict[str, Any] | None = None) -> ReviewTask:
    """Put a task back in the unassigned pool (the assignee leaving it, or a reviewer freeing it)."""
    with transaction.atomic():
        task = _locked(task_id, actor.user)
        if task.assignee_id is None and task.assignee_group_id is None:
            return task
        previous = str(task.assignee or task.assignee_group)
        task.assignee, task.assignee_group = None, None
        transition(task, "unclaim", actor=actor, metadata=_meta(origin, previous=previous))
    return task


def review_assign(
    *, task_id: Any, actor: Actor, user: Any = None, group: Group | None = None, origin: dict[str, Any] | None = None
) -> ReviewTask:
    """Assign to a user who may decide it, or hand it to a group with such a member (whose members then see it as
    theirs). Assigning it to whoever already has it changes nothing, like claiming your own task again."""
    if (user is None) == (group is None):
        raise DomainError("assign to either a user or a group", "assignee")
    with transaction.atomic():
        task = _locked(task_id, actor.user)
        refusal = _assign_refusal(task, user, group)
        if refusal:
            raise DomainError(f"cannot assign: {refusal}", "assignee")
        if (task.assignee_id, task.assignee_group_id) == (getattr(user, "pk", None), getattr(group, "pk", None)):
            return task
        if user is not None:
            task.assignee, task.assignee_group = user, None
            transition(task, "assign", actor=actor, metadata=_meta(origin, assignee=user.username))
        else:
            task.assignee, task.assignee_group = None, group
            transition(task, "hand_to_group", actor=actor, metadata=_meta(origin, group=group.name))
        emit(task.requirement, "ReviewTaskAssigned", {"review_task": str(task.pk), "by": actor.user.pk})
    return task


def _assign_refusal(task: ReviewTask, user: Any, group: Group | None) -> str:
    if user is not None:
        return decide_refusal(user, task.organization, project_id=task.requirement.project_id)
    if not assignable_groups(task).filter(pk=group.pk).exists():
        return f"no member of '{group}' may decide review tasks of {task.organization}"
    return ""


def assignable_users(task: ReviewTask) -> list[Any]:
    """Members who may decide the task: the choices of the admin's assign form (one query)."""
    return list(_deciders(task).order_by("username"))


def assignable_groups(task: ReviewTask) -> QuerySet[Group]:
    """Groups with at least one member who may decide the task: the assign form's group choices."""
    return Group.objects.filter(Exists(_deciders(task).filter(groups=OuterRef("pk")))).order_by("name")


def _deciders(task: ReviewTask) -> QuerySet[Any]:
    return project_deciders(task.organization_id, task.requirement.project.settings)


def project_deciders(organization_id: Any, project_settings: dict[str, Any] | None) -> QuerySet[Any]:
    """Active users decide_refusal lets decide the review tasks of a project with these settings, as one queryset
    (no distinct: filters are EXISTS)."""
    member = Membership.objects.filter(user=OuterRef("pk"), organization_id=organization_id)
    users = get_user_model().objects.filter(Exists(member.filter(role__in=DECIDING_ROLES)), is_active=True)
    group = str((project_settings or {}).get("reviewers_group") or "")
    if group:
        in_group = Group.objects.filter(user=OuterRef("pk"), name=group)
        users = users.filter(Exists(member.filter(role=Role.ADMIN)) | Exists(in_group))
    return users


def lock_task_requirement(task_id: Any, *, skip_locked: bool = False) -> bool:
    """Lock a review task's requirement, before the task: every writer of review tasks does so (decisions,
    claims and assignments, story edits, the SLA sweep), so none of them waits for another in a cycle. A writer
    that locked the task alone deadlocked with a decision: the decider held the requirement and waited for the
    task, and the writer's audit row and event, whose foreign keys are checked at COMMIT, waited for the
    requirement. One statement (the requirement joined to the task). False: no such task, or (skip_locked)
    another transaction holds the requirement."""
    locked = Requirement.objects.select_for_update(skip_locked=skip_locked, of=("self",)).filter(
        review_tasks__pk=task_id)
    return locked.values_list("pk", flat=True).first() is not None


def _locked(task_id: Any, user: Any) -> ReviewTask:
    """The task, locked, once `user` may review it and it is still pending: the permission first, as review_decide
    checks it, so a member who may not review is told that (403), whatever state the task is in."""
    lock_task_requirement(task_id)
    task = ReviewTask.objects.select_for_update(of=("self",)).select_related(
        "organization", "requirement", "assignee", "assignee_group").get(pk=task_id)
    ensure_may_review(user, task)
    if not task.is_pending:
        raise IllegalTransition(f"review task is already {task.state}")
    if held := replay_hold(task):
        raise IllegalTransition(held)
    return task


def _meta(origin: dict[str, Any] | None, **fields: Any) -> dict[str, Any]:
    return {**fields, **({"origin": origin} if origin else {})}
