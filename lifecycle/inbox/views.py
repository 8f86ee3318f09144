"""Views of the review inbox, mounted by ReviewTaskAdmin. Each POST calls one service and reports back."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
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
from lifecycle.services.assignment import (
    assignable_groups,
    assignable_users,
    decide_refusal,
    review_assign,
    review_claim,
    review_unassign,
)
from lifecycle.services.reviews import review_decide
from lifecycle.services.story_edits import story_edit

REFUSED = (DomainError, IllegalTransition, NotPermitted)


def review_page(model_admin: Any, request: HttpRequest, task: ReviewTask) -> TemplateResponse:
    refusal = decide_refusal(request.user, task.organization, project_id=task.requirement.project_id)
    may_act = task.is_pending and not refusal
    artifacts = sections.latest_artifacts(task)
    context = {
        **model_admin.admin_site.each_context(request), "opts": ReviewTask._meta, "title": str(task), "task": task,
        "refusal": refusal, "may_act": may_act, "now": timezone.now(),
        "stories": sections.stories(task, editable=may_act, editing=request.GET.get("edit", "")),
        "spec_summary": sections.spec_summary(task, artifacts),
        "changed_files": sections.changed_files(artifacts), "tests": sections.suite_results(artifacts),
        "other_context": sections.other_context(task), "history": sections.history(task),
        "options": sections.decision_options(task), "budget": sections.budget_standing(task),
        "assign_form": AssignForm(users=assignable_users(task), groups=assignable_groups(task)) if may_act else None,
    }
    return TemplateResponse(request, "admin/lifecycle/reviewtask/review.html", context)


def decide(model_admin: Any, request: HttpRequest, pk: Any) -> HttpResponse:
    task = _task(model_admin, request, pk)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"invalid decision: {form.errors.as_text()}")
        return redirect(_task_url(task))
    decision = form.cleaned_data["decision"]
    done = run_service(request, lambda: review_decide(task_id=task.pk, actor=_actor(request), origin=request_origin(request),
                                               **form.cleaned_data), f"{task}: {decision} recorded")
    return redirect(_inbox_url() if done else _task_url(task))


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
        messages.error(request, f"the story was not changed: {form.errors.as_text()}")
    else:
        run_service(request, lambda: story_edit(task_id=task.pk, story_id=story_pk, actor=_actor(request),
                                         changes=form.cleaned_data, origin=request_origin(request)),
             f"story '{form.cleaned_data['title']}' saved; the change is recorded as yours")
    return redirect(f"{_task_url(task)}#stories")


def bulk_decide(model_admin: Any, request: HttpRequest, queryset: Any, decision: str) -> TemplateResponse | None:
    """An admin action: confirm with one reason, then decide each task on its own (one failure stops none)."""
    tasks = list(queryset.select_related("requirement"))
    form = BulkDecisionForm(request.POST if "apply" in request.POST else None, initial={"decision": decision})
    if form.is_bound and form.is_valid():
        reason, decision = form.cleaned_data["reason"].strip(), form.cleaned_data["decision"]
        origin = {**request_origin(request), "bulk": len(tasks)}
        decided = sum(run_service(request, lambda t=t: review_decide(task_id=t.pk, actor=_actor(request), decision=decision,
                                                                     reason=reason, origin=origin), "", about=t)
                      for t in tasks)
        messages.success(request, f"{decision}: {decided} of {len(tasks)} task(s) decided")
        return None
    return TemplateResponse(request, "admin/lifecycle/reviewtask/bulk_decide.html", {
        **model_admin.admin_site.each_context(request), "opts": ReviewTask._meta, "title": f"{decision.title()} tasks",
        "form": form, "tasks": tasks, "action": request.POST.get("action", ""),
    })


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
