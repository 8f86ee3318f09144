"""The specialists' tools (ADR 36), built per answer for the person who asked.

Every tool is `read` (facts from the records), `suggest` (a draft the person may use) or `mutate` (an action). Read
and suggest run at once; a mutate tool does not run: it becomes an ActionApproval (lifecycle.services.approvals)
that the person decides, or that runs at once, as the asker, where the project pre-authorized its type. A tool sees
only the asker's organization: any id from another organization, or none at all, is "not found", whatever the
model was told. Every call is a ToolCall row on the answer, shown with it.

A tool's arguments are a pydantic model (its JSON schema is the tool's input schema); a model's bad arguments come
back to it as the tool's error, as does a refusal.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.utils import timezone
from pydantic import BaseModel, Field, ValidationError

from agents.llm.base import ToolSpec
from agents.llm.tool_use import Tool, ToolRefused
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import Conversation, Message, Requirement, ReviewTask, ToolCall
from lifecycle.models.conversations import ToolKind
from lifecycle.services import approvals
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
        found = Requirement.objects.filter(pk=wanted, organization_id=self.organization_id).first() if wanted else None
        if found is None:
            raise ToolRefused(f"no requirement {wanted or '(none named)'} in this organization")
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
    constraint: str = ""


class CancelArgs(BaseModel):
    requirement_id: str | None = None
    reason: str


def requirement_status(scope: Scope, args: RequirementArgs) -> str:
    requirement = scope.requirement(args.requirement_id)
    since = requirement.transitions.order_by("-id").values_list("created_at", flat=True).first() or requirement.created_at
    waiting = list(requirement.review_tasks.filter(state__in=PENDING_REVIEW_STATES)
                   .values_list("kind", "question", "sla_deadline"))
    lines = [f"requirement {requirement.pk}: {requirement}", f"state: {requirement.state} since "
             f"{since:%Y-%m-%d %H:%M} UTC ({_ago(since)})"]
    lines += [f"waiting review task: {kind} (due {due:%Y-%m-%d %H:%M} UTC): {question[:300]}"
              for kind, question, due in waiting] or ["no review task waiting"]
    return "\n".join(lines)


def review_tasks_waiting(scope: Scope, args: NoArgs) -> str:
    tasks = (ReviewTask.objects.filter(organization_id=scope.organization_id, state__in=PENDING_REVIEW_STATES)
             .select_related("requirement").order_by("sla_deadline")[:20])
    return "\n".join(f"task {t.pk}: {t.kind} on '{t.requirement}' (options: {', '.join(t.options)}; due "
                     f"{t.sla_deadline:%Y-%m-%d %H:%M} UTC)" for t in tasks) or "no review task is waiting"


def decide_review_task(scope: Scope, args: DecideReviewArgs) -> approvals.Proposed:
    return approvals.propose_review_decision(organization_id=scope.organization_id, task_id=args.task_id,
                                             decision=args.decision, reason=args.reason, feedback=args.feedback,
                                             constraint=args.constraint)


def cancel_requirement(scope: Scope, args: CancelArgs) -> approvals.Proposed:
    requirement = scope.requirement(args.requirement_id)
    return approvals.propose_cancel(organization_id=scope.organization_id, requirement_id=requirement.pk,
                                    reason=args.reason)


TOOLS = {tool.name: tool for tool in [
    AssistantTool("requirement_status", ToolKind.READ, "A requirement's state, since when, and the review tasks it "
                  "waits on.", RequirementArgs, requirement_status),
    AssistantTool("review_tasks_waiting", ToolKind.READ, "The organization's review tasks waiting for a decision, "
                  "soonest due first.", NoArgs, review_tasks_waiting),
    AssistantTool("decide_review_task", ToolKind.MUTATE, "Ask for a review task to be decided (approve, reject, "
                  "request changes, run a failed step again, ...): the person approves the request before it runs.",
                  DecideReviewArgs, decide_review_task),
    AssistantTool("cancel_requirement", ToolKind.MUTATE, "Ask for a requirement to be cancelled: the person "
                  "approves the request before it runs.", CancelArgs, cancel_requirement),
]}

SPECIALIST_TOOLS: dict[str, tuple[str, ...]] = {
    "status_reporter": ("requirement_status", "review_tasks_waiting"),
    "troubleshooter": ("requirement_status",),
    "review_assistant": ("review_tasks_waiting", "requirement_status", "decide_review_task", "cancel_requirement"),
    "code_guide": ("requirement_status",),
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
        call = ToolCall(message=scope.message, specialist=scope.specialist, tool=tool.name, kind=tool.kind,
                        arguments=arguments, status=ToolCall.Status.REFUSED)
        try:
            args = tool.arguments.model_validate(arguments)
            outcome = tool.run(scope, args)
            text = _mutate(outcome, scope, call) if tool.kind == ToolKind.MUTATE else str(outcome)[:RESULT_MAX_CHARS]
            if tool.kind != ToolKind.MUTATE:
                call.status, call.result = ToolCall.Status.DONE, text
                call.save()
            return text
        except ValidationError as exc:
            call.result = f"bad arguments: {exc.errors(include_url=False)[:5]}"
        except (ToolRefused, DomainError, IllegalTransition, NotPermitted) as exc:
            call.result = str(exc)
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
    text = (f"approval request {approval.pk} created: '{approval.summary}'. It has NOT run: it waits for "
            f"{scope.asker} to approve or reject it.")
    ToolCall.objects.filter(pk=call.pk).update(result=text)
    return text


def _ago(when) -> str:
    minutes = int((timezone.now() - when).total_seconds() // 60)
    return f"{minutes // 1440} d {minutes % 1440 // 60} h" if minutes >= 1440 else f"{minutes // 60} h {minutes % 60} min"


