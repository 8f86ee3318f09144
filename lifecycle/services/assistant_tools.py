"""The specialists' tools (ADR 36), built per answer for the person who asked.

Every tool is `read` (facts from the records), `suggest` (a draft the person may use) or `mutate` (an action). Read
and suggest run at once; a mutate tool does not run: it becomes an ActionApproval (lifecycle.services.approvals)
that the person decides, or that runs at once, as the asker, where the project pre-authorized its type. A tool sees
only the asker's organization: any id from another organization, or none at all, is "not found", whatever the
model was told. Every call is a ToolCall row on the answer, shown with it; its arguments are taken as `recorded`
keeps them (a pasted key masked, a NUL dropped) before anything acts on them.

A tool's arguments are a pydantic model (its JSON schema is the tool's input schema); a model's bad arguments come
back to it as the tool's error, as does a refusal. What the tools read is in one module per specialist
(assistant_status, assistant_failures, assistant_reviews, assistant_code), each given a requirement or a review
task this module already found within the organization (Scope.requirement, Scope.review_task); each returns short
text, cut to a few rows and to RESULT_MAX_CHARS, because the model's context is bounded.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError as InvalidId
from pydantic import BaseModel, Field, ValidationError

from agents.llm.base import ToolSpec
from agents.llm.redact import typed
from agents.llm.tool_use import Tool, ToolRefused
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import Conversation, Message, Requirement, ReviewTask, ToolCall
from lifecycle.models.conversations import ToolKind
from lifecycle.services import approvals
from lifecycle.services import assistant_code as code
from lifecycle.services import assistant_failures as failures
from lifecycle.services import assistant_reviews as reviews
from lifecycle.services import assistant_status as status
from lifecycle.states import PENDING_REVIEW_STATES

RESULT_MAX_CHARS = 8000


@dataclass(frozen=True)
class Scope:
    """Where a tool runs: the asker's organization and conversation; `asker` is None in a system conversation."""

    organization_id: Any
    asker: Any
    conversation: Conversation
    message: Message
    specialist: str

    def requirement(self, requirement_id: str | None) -> Requirement:
        """The requirement named, or the conversation's own; only within the organization."""
        wanted = requirement_id or self.conversation.requirement_id
        return _within(Requirement.objects.filter(organization_id=self.organization_id), wanted, "requirement")

    def review_task(self, task_id: str) -> ReviewTask:
        """The review task named; only within the organization."""
        tasks = ReviewTask.objects.filter(organization_id=self.organization_id).select_related("requirement", "assignee")
        return _within(tasks, task_id, "review task")


def _within(rows: Any, pk: Any, what: str) -> Any:
    """The row with this id among `rows` (already the organization's): anything else, a malformed id included, is
    the same "not found", so an answer never tells another organization's ids from ones that do not exist."""
    try:
        found = rows.filter(pk=pk).first() if pk else None
    except (InvalidId, ValueError):
        found = None
    if found is None:
        raise ToolRefused(f"not found: no {what} {str(pk or '(none named)')[:60]} in this organization")
    return found


@dataclass(frozen=True)
class AssistantTool:
    name: str
    kind: str  # ToolKind
    description: str
    arguments: type[BaseModel]
    # read/suggest: the text the model reads; mutate: the action it proposes (approvals.Proposed)
    run: Callable[[Scope, Any], Any]


class RequirementArgs(BaseModel):
    requirement_id: str | None = Field(default=None, description="the requirement's id; empty: the conversation's own")


class NoArgs(BaseModel):
    pass


class DecideReviewArgs(BaseModel):
    task_id: str
    decision: str = Field(description="one of the task's options, e.g. approve, reject, request_changes")
    reason: str = ""
    feedback: str = ""
    constraint: str = Field(default="", description="for inject_constraint: the constraint every later step gets")
    budget: dict[str, Any] | None = Field(default=None, description=(
        "for override_budget: the new limits, as the budget review task shows them"))


class CancelArgs(BaseModel):
    requirement_id: str | None = None
    reason: str


class TaskArgs(BaseModel):
    task_id: str = Field(description="the review task's id")


class DraftArgs(TaskArgs):
    decision: str = Field(default="", description="the decision the person leans to, one of the task's options")


class SearchArgs(RequirementArgs):
    query: str = Field(max_length=500, description="words, names or a path to look for; empty: the repository's map")


class ReadArgs(RequirementArgs):
    path: str = Field(max_length=500, description="a file's path in the repository, as code_search shows it")
    symbol: str = Field(default="", max_length=200, description="a class, function or Class.method to show first")


def requirement_status(scope: Scope, args: RequirementArgs) -> str:
    requirement = scope.requirement(args.requirement_id)
    since = requirement.transitions.order_by("-id").values_list("created_at", flat=True).first() or requirement.created_at
    waiting = list(requirement.review_tasks.filter(state__in=PENDING_REVIEW_STATES)
                   .values_list("kind", "question", "sla_deadline"))
    lines = [f"requirement {requirement.pk}: {requirement}", f"state: {requirement.state} since "
             f"{since:%Y-%m-%d %H:%M} UTC ({status.ago(since)})"]
    lines += [f"waiting review task: {kind} (due {due:%Y-%m-%d %H:%M} UTC): {question[:300]}"
              for kind, question, due in waiting] or ["no review task waiting"]
    return "\n".join(lines)


def review_tasks_waiting(scope: Scope, args: NoArgs) -> str:
    tasks = (ReviewTask.objects.filter(organization_id=scope.organization_id, state__in=PENDING_REVIEW_STATES)
             .select_related("requirement").order_by("sla_deadline")[:20])
    return "\n".join(f"task {t.pk}: {t.kind} on '{t.requirement}' (options: {', '.join(t.options)}; due "
                     f"{t.sla_deadline:%Y-%m-%d %H:%M} UTC)" for t in tasks) or "no review task is waiting"


def decide_review_task(scope: Scope, args: DecideReviewArgs) -> approvals.Proposed:
    task = scope.review_task(args.task_id)
    return approvals.propose_review_decision(organization_id=scope.organization_id, task_id=task.pk,
                                             decision=args.decision, reason=args.reason, feedback=args.feedback,
                                             constraint=args.constraint, budget=args.budget)


def cancel_requirement(scope: Scope, args: CancelArgs) -> approvals.Proposed:
    requirement = scope.requirement(args.requirement_id)
    return approvals.propose_cancel(organization_id=scope.organization_id, requirement_id=requirement.pk,
                                    reason=args.reason)


def _on_requirement(read: Callable[[Requirement], str]) -> Callable[[Scope, RequirementArgs], str]:
    return lambda scope, args: read(scope.requirement(args.requirement_id))


def _on_task(read: Callable[[ReviewTask], str]) -> Callable[[Scope, TaskArgs], str]:
    return lambda scope, args: read(scope.review_task(args.task_id))


TOOLS = {tool.name: tool for tool in [
    AssistantTool("requirement_status", ToolKind.READ, "A requirement's state, since when, and the review tasks it waits "
                  "on.", RequirementArgs, requirement_status),
    AssistantTool("review_tasks_waiting", ToolKind.READ, "The organization's review tasks waiting for a decision, soonest "
                  "due first.", NoArgs, review_tasks_waiting),
    # status reporter
    AssistantTool("requirements_in_flight", ToolKind.READ, "Every unfinished requirement of the organization: its state, how "
                  "long it has been in it, and what it waits on (a person's review, a step, the budget).", NoArgs,
                  lambda scope, args: status.requirements_in_flight(scope.organization_id)),
    AssistantTool("requirement_blockers", ToolKind.READ, "What blocks a requirement now: review tasks waiting (with their "
                  "SLA), an exhausted budget, failed steps; and the steps under way.", RequirementArgs,
                  _on_requirement(status.requirement_blockers)),
    AssistantTool("requirement_spend", ToolKind.READ, "A requirement's spend (steps, sandbox runs, tokens, cost) against its "
                  "budgets, for the requirement and each role.", RequirementArgs, _on_requirement(status.requirement_spend)),
    AssistantTool("status_digest", ToolKind.READ, "The project manager's digest of a requirement: headline, time in state, "
                  "blockers, escalations, loops, model spend per role.", RequirementArgs, _on_requirement(status.status_digest)),
    # troubleshooter
    AssistantTool("failure_routes", ToolKind.READ, "A requirement's failures and where each was routed, newest first: the "
                  "rule, the facts, the trace of rules, what the route caused.", RequirementArgs,
                  _on_requirement(failures.failure_routes)),
    AssistantTool("step_errors", ToolKind.READ, "The errors of a requirement's steps that failed (or were parked), newest "
                  "first.", RequirementArgs, _on_requirement(failures.step_errors)),
    AssistantTool("test_reports", ToolKind.READ, "A requirement's newest test reports (self-tests, quality gate): counts, "
                  "gate reasons, failing tests, output tail.", RequirementArgs, _on_requirement(failures.test_reports)),
    AssistantTool("attempt_history", ToolKind.READ, "Every step of a requirement by key and attempt, in order, with its "
                  "state and error: the history of its attempts.", RequirementArgs, _on_requirement(failures.attempt_history)),
    # review assistant
    AssistantTool("explain_review_task", ToolKind.READ, "A review task explained: its question, the team's reasoning, the "
                  "pinned context, the options, the SLA and who holds it.", TaskArgs, _on_task(reviews.explain_review_task)),
    AssistantTool("review_change_summary", ToolKind.READ, "The change behind a review task (files, +/- lines, branch, scope) "
                  "and its test results.", TaskArgs, _on_task(reviews.review_change_summary)),
    AssistantTool("draft_feedback", ToolKind.SUGGEST, "A feedback skeleton for a review task, filled with its facts, for the "
                  "person to edit; it decides nothing.", DraftArgs,
                  lambda scope, args: reviews.feedback_draft(scope.review_task(args.task_id), args.decision)),
    AssistantTool("decide_review_task", ToolKind.MUTATE, "Ask for a review task to be decided (approve, reject, request "
                  "changes, run a failed step again, ...): the person approves the request before it runs.",
                  DecideReviewArgs, decide_review_task),
    AssistantTool("cancel_requirement", ToolKind.MUTATE, "Ask for a requirement to be cancelled: the person approves the "
                  "request before it runs.", CancelArgs, cancel_requirement),
    # code guide
    AssistantTool("code_search", ToolKind.READ, "Search a requirement's code (its workspace, or its repository): the "
                  "definitions and files that match, or the repository's map.", SearchArgs,
                  lambda scope, args: code.code_search(scope.requirement(args.requirement_id), args.query)),
    AssistantTool("code_read", ToolKind.READ, f"Read a file of a requirement's code, whole when it fits {code.READ_TOKENS} "
                  "tokens, else the definition named and the file's head.", ReadArgs,
                  lambda scope, args: code.code_read(scope.requirement(args.requirement_id), args.path, args.symbol)),
]}

SPECIALIST_TOOLS: dict[str, tuple[str, ...]] = {
    "status_reporter": ("requirements_in_flight", "requirement_status", "requirement_blockers", "requirement_spend",
                        "status_digest", "review_tasks_waiting"),
    "troubleshooter": ("requirement_status", "failure_routes", "step_errors", "test_reports", "attempt_history"),
    "review_assistant": ("review_tasks_waiting", "explain_review_task", "review_change_summary", "draft_feedback",
                         "requirement_status", "decide_review_task", "cancel_requirement"),
    "code_guide": ("requirement_status", "code_search", "code_read"),
}


def tools_for(specialist: str, *, asker: Any, conversation: Conversation, message: Message) -> list[Tool]:
    """The specialist's tools, bound to the asker; a system conversation (no asker) gets no mutating tool."""
    scope = Scope(organization_id=conversation.organization_id, asker=asker, conversation=conversation,
                  message=message, specialist=specialist)
    chosen = [TOOLS[name] for name in SPECIALIST_TOOLS[specialist]]
    return [_bound(tool, scope) for tool in chosen if asker is not None or tool.kind != ToolKind.MUTATE]


def _bound(tool: AssistantTool, scope: Scope) -> Tool:
    spec = ToolSpec(name=tool.name, description=f"[{tool.kind}] {tool.description}",
                    input_schema=tool.arguments.model_json_schema())

    def run(arguments: dict[str, Any]) -> str:
        arguments = typed(arguments)  # what the tool acts on is what its row keeps: no key, no NUL
        call = ToolCall(message=scope.message, specialist=scope.specialist, tool=tool.name, kind=tool.kind,
                        arguments=arguments, status=ToolCall.Status.REFUSED)
        try:
            args = tool.arguments.model_validate(arguments)
            outcome = tool.run(scope, args)
            text = (_mutate(outcome, scope, call) if tool.kind == ToolKind.MUTATE
                    else typed(str(outcome)[:RESULT_MAX_CHARS]))
            if tool.kind != ToolKind.MUTATE:
                call.status, call.result = ToolCall.Status.DONE, text
                call.save()
            return text
        except ValidationError as exc:
            call.result = f"bad arguments: {exc.errors(include_url=False)[:5]}"
        except (ToolRefused, DomainError, IllegalTransition, NotPermitted) as exc:
            call.result = str(exc)
        call.status = ToolCall.Status.REFUSED  # also when the request was refused after it was marked as asked
        call.save()
        raise ToolRefused(call.result)

    return Tool(spec=spec, run=run)


def _mutate(proposed: approvals.Proposed, scope: Scope, call: ToolCall) -> str:
    call.status = ToolCall.Status.AWAITING_APPROVAL
    call.save()
    approval = approvals.approval_request(proposed=proposed, asker=scope.asker, conversation=scope.conversation,
                                          tool_call=call)
    if approval.preauthorization_id:
        ToolCall.objects.filter(pk=call.pk).update(status=ToolCall.Status.PRE_AUTHORIZED, result=approval.result)
        return f"pre-authorized for this project, so it ran at once as {scope.asker}: {approval.result}"
    who = (str(scope.asker) if approvals.may_decide(scope.asker, approval)
           else f"a reviewer of the project ({scope.asker} may not decide it)")
    text = (f"approval request {approval.pk} created: '{approval.summary}'. It has NOT run: it waits for "
            f"{who} to approve or reject it.")
    ToolCall.objects.filter(pk=call.pk).update(result=text)
    return text



