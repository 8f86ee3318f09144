"""Views of the review inbox, mounted by ReviewTaskAdmin. Each POST calls one service and reports back."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme

from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.inbox import sections
from lifecycle.inbox.forms import AssignForm, BulkDecisionForm, DecisionForm, StoryForm
from lifecycle.models import ReviewTask
from lifecycle.origin import request_origin
from lifecycle.selectors import origins_visible_to
from lifecycle.services.assignment import (
    assignable_groups,
    assignable_users,
    decide_refusal,
    replay_hold,
    review_assign,
    review_claim,
    review_unassign,
)
from lifecycle.services.decisions import review_decide
from lifecycle.services.holds import change_hold
from lifecycle.services.sla import policy_decision
from lifecycle.services.story_edits import stories_version, story_edit
from lifecycle.states import Decision, ReviewKind

REFUSED = (DomainError, IllegalTransition, NotPermitted)


def review_page(model_admin: Any, request: HttpRequest, task: ReviewTask, *, decision_form: DecisionForm | None = None,
                story_form: StoryForm | None = None, editing: str = "", status: int = 200) -> TemplateResponse:
    """The task's page. A refused decision or story edit comes back here with the posted form (its values and
    errors) and the status saying why, instead of a redirect that would lose what the reviewer typed."""
    refusal = decide_refusal(request.user, task.organization, project_id=task.requirement.project_id)
    held = replay_hold(task) if task.is_pending else ""
    may_act = task.is_pending and not refusal and not held
    artifacts = sections.latest_artifacts(task)
    budget = sections.budget_standing(task)
    context = {
        **model_admin.admin_site.each_context(request), "opts": ReviewTask._meta, "title": str(task), "task": task,
        "task_url": _task_url(task), "refusal": refusal, "held": held, "may_act": may_act, "now": timezone.now(),
        "stories": sections.stories(task, editable=may_act, editing=editing or request.GET.get("edit", ""),
                                    posted=story_form),
        "spec_summary": sections.spec_summary(task, artifacts),
        "changed_files": sections.changed_files(task, artifacts), "tests": sections.suite_results(artifacts),
        "other_context": sections.other_context(task), "history": sections.history(task),
        "show_origins": origins_visible_to(request.user, task.organization_id),
        "options": sections.decision_options(task), "budget": budget, "stories_version": stories_version(task),
        "policy_decision": policy_decision(task) if task.decide_by else ("", ""),
        "decision_form": decision_form if decision_form is not None else DecisionForm(
            initial={"budget": budget["suggestion"] if budget else ""}),
        "assign_form": AssignForm(users=assignable_users(task), groups=assignable_groups(task)) if may_act else None,
    }
    return TemplateResponse(request, "admin/lifecycle/reviewtask/review.html", context, status=status)


def decide(model_admin: Any, request: HttpRequest, pk: Any) -> HttpResponse:
    task = _task(model_admin, request, pk)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        return _decision_refused(model_admin, request, task, form, 400)
    try:
        review_decide(task_id=task.pk, actor=_actor(request), origin=request_origin(request), version_required=True,
                      **form.cleaned_data)
    except REFUSED as exc:
        return _decision_refused(model_admin, request, _task(model_admin, request, pk), _with_error(form, exc),
                                 refusal_status(exc))
    messages.success(request, f"{task}: {form.cleaned_data['decision']} recorded")
    return redirect(_inbox_url())


def _decision_refused(model_admin: Any, request: HttpRequest, task: ReviewTask, form: DecisionForm,
                      status: int) -> TemplateResponse:
    """The review page again (the task as it is now) with the decision form on what the reviewer sent, and why."""
    messages.error(request, f"the decision was not recorded: {_errors_text(form)}")
    return review_page(model_admin, request, task, decision_form=form, status=status)


def claim(model_admin: Any, request: HttpRequest, pk: Any) -> HttpResponse:
    task = _task(model_admin, request, pk)
    run_service(request, lambda: review_claim(task_id=task.pk, actor=_actor(request), origin=request_origin(request)),
         f"{task}: claimed; it is yours to decide")
    return _back(request, task)


def unassign(model_admin: Any, request: HttpRequest, pk: Any) -> HttpResponse:
    task = _task(model_admin, request, pk)
    run_service(request, lambda: review_unassign(task_id=task.pk, actor=_actor(request), origin=request_origin(request)),
         f"{task}: unassigned")
    return _back(request, task)


def assign(model_admin: Any, request: HttpRequest, pk: Any) -> HttpResponse:
    task = _task(model_admin, request, pk)
    form = AssignForm(request.POST, users=assignable_users(task), groups=assignable_groups(task))
    if not form.is_valid():
        messages.error(request, " ".join(form.non_field_errors()) or form.errors.as_text())
        return _back(request, task)
    user, group = form.cleaned_data.get("user"), form.cleaned_data.get("group")
    run_service(request, lambda: review_assign(task_id=task.pk, actor=_actor(request), user=user, group=group,
                                        origin=request_origin(request)), f"{task}: assigned to {user or group}")
    return _back(request, task)


def edit_story(model_admin: Any, request: HttpRequest, pk: Any, story_pk: Any) -> HttpResponse:
    task = _task(model_admin, request, pk)
    form = StoryForm(request.POST)
    if not form.is_valid():
        return _story_refused(model_admin, request, task, story_pk, form, 400)
    try:
        edit = story_edit(task_id=task.pk, story_id=story_pk, actor=_actor(request), changes=form.cleaned_data,
                          version=form.cleaned_data["version"], origin=request_origin(request))
    except REFUSED as exc:
        return _story_refused(model_admin, request, _task(model_admin, request, pk), story_pk, _with_error(form, exc),
                              refusal_status(exc))
    if edit is None:
        messages.info(request, f"story '{form.cleaned_data['title']}': nothing changed, so nothing was saved")
    else:
        messages.success(request, f"story '{form.cleaned_data['title']}' saved; the change is recorded as yours")
    return redirect(f"{_task_url(task)}#stories")


def _story_refused(model_admin: Any, request: HttpRequest, task: ReviewTask, story_pk: Any, form: StoryForm,
                   status: int) -> TemplateResponse:
    """The review page again with the edit form open on what the reviewer sent, and why it was refused."""
    messages.error(request, f"the story was not changed: {_errors_text(form)}")
    return review_page(model_admin, request, task, story_form=form, editing=str(story_pk), status=status)


def bulk_decide(model_admin: Any, request: HttpRequest, queryset: Any, decision: str) -> TemplateResponse | None:
    """An admin action: confirm with one reason, then decide each task on its own (one failure stops none)."""
    tasks = list(queryset.select_related("organization", "requirement"))
    form = BulkDecisionForm(request.POST if "apply" in request.POST else None, initial={"decision": decision})
    if form.is_bound and form.is_valid():
        reason, decision = form.cleaned_data["reason"].strip(), form.cleaned_data["decision"]
        origin = {**request_origin(request), "bulk": len(tasks)}
        skipped = {t.pk: why for t in tasks if (why := _not_in_bulk(request.user, t, decision))}
        for task in tasks:
            if task.pk in skipped:
                messages.warning(request, f"{task}: {skipped[task.pk]}")
        decided = sum(run_service(request, lambda t=t: review_decide(task_id=t.pk, actor=_actor(request), decision=decision,
                                                                     reason=reason, origin=origin), "", about=t)
                      for t in tasks if t.pk not in skipped)
        also = f"; {len(skipped)} skipped" if skipped else ""
        messages.success(request, f"{decision}: {decided} of {len(tasks)} task(s) decided{also}")
        return None
    return TemplateResponse(request, "admin/lifecycle/reviewtask/bulk_decide.html", {
        **model_admin.admin_site.each_context(request), "opts": ReviewTask._meta, "title": f"{decision.title()} tasks",
        "form": form, "tasks": tasks, "action": request.POST.get("action", ""),
    })


def _not_in_bulk(user: Any, task: ReviewTask, decision: str) -> str:
    """Why a bulk decision leaves this pending task out (reported, not failed), as its own page would not decide it
    so: the user may not decide it, it is a replay's held gate, or it approves a deployment a hold keeps for a
    person to read (a CI workflow, the scope guard: holds.py), which is approved on its own page, where the change
    is shown, not with one reason for many. A task no longer pending is left to the service's refusal."""
    if not task.is_pending:
        return ""
    if why := decide_refusal(user, task.organization, project_id=task.requirement.project_id) or replay_hold(task):
        return f"skipped: {why}"
    if decision == Decision.APPROVE and task.kind == ReviewKind.DEPLOYMENT_APPROVAL and (held := change_hold(task)):
        return f"not approved in bulk, approve it on its own page: {held}"
    return ""


def post_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    def run(model_admin: Any, request: HttpRequest, **kwargs: Any) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        return view(model_admin, request, **kwargs)
    return run


def run_service(request: HttpRequest, call: Callable[[], Any], success: str, *, about: Any = None) -> bool:
    """Call a service; a refusal becomes an admin message saying why (and about what). True when it went through."""
    try:
        call()
    except REFUSED as exc:
        messages.error(request, f"{about}: {exc}" if about is not None else str(exc))
        return False
    if success:
        messages.success(request, success)
    return True


def refusal_status(exc: Exception) -> int:
    """The status of a refused request, as the API maps it: a conflict 409, not allowed 403, bad input 400."""
    if isinstance(exc, IllegalTransition):
        return 409
    if isinstance(exc, NotPermitted):
        return 403
    return getattr(exc, "status", 400)


def _with_error(form: Any, exc: Exception) -> Any:
    """The service's refusal on the posted form: on the field it names, else on the form as a whole."""
    field = getattr(exc, "field", None)
    form.add_error(field if field in form.fields else None, ValidationError(str(exc), code=getattr(exc, "code", None)))
    return form


def _errors_text(form: Any) -> str:
    return "; ".join(" ".join(errors) if field == "__all__" else f"{field}: {' '.join(errors)}"
                     for field, errors in form.errors.items())


def _task(model_admin: Any, request: HttpRequest, pk: Any) -> ReviewTask:
    return get_object_or_404(model_admin.get_queryset(request).select_related("organization", "requirement"), pk=pk)


def _actor(request: HttpRequest) -> Actor:
    return Actor.human(request.user, "admin")


def _task_url(task: ReviewTask) -> str:
    return reverse("admin:lifecycle_reviewtask_change", args=[task.pk])


def _inbox_url() -> str:
    return reverse("admin:lifecycle_reviewtask_changelist")


def _back(request: HttpRequest, task: ReviewTask) -> HttpResponse:
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return redirect(target)
    return redirect(_task_url(task))
