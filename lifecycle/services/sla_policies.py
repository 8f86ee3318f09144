"""SLA policies for review tasks: how long a kind may wait, what happens then, and the stated default.

Layers, later wins: settings AITEAM_REVIEW_POLICIES["*"], the kind's hours in
AITEAM_REVIEW_SLA_HOURS, AITEAM_REVIEW_POLICIES[kind], then the project's
settings["review_policies"]["*"] and [kind]. A task keeps the policy it was opened with
(ReviewTask.policy), so editing a project's settings never rewrites a promise already made.

No task waits forever unseen: whatever the action, `decide_after_hours` after opening the policy
decides with its stated default, marked as a policy decision. A deployment approval is the
exception (states.NEVER_DECIDED_BY_SLA): at that limit it is escalated and left to a person.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lifecycle.states import REVIEW_OPTIONS, Decision, ReviewKind

log = logging.getLogger(__name__)
Action = Literal["remind", "reassign", "escalate", "auto_decide"]
ANY_KIND = "*"


MAX_HOURS = 24 * 365  # a year: beyond it a deadline is no promise, and far beyond it datetime overflows
Hours = Annotated[float, Field(gt=0, le=MAX_HOURS, allow_inf_nan=False)]


class ReviewPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sla_hours: Hours = Field(default=24, description="the task is overdue this long after it opened")
    action: Action = "remind"
    group: str = Field(default="", description="reassign: the Django group that takes the task over")
    manager: str = Field(default="", description="escalate: the manager's username; blank = the organization's admins")
    remind_every_hours: Hours = Field(default=4, description="after the first action, remind this often")
    decide_after_hours: Hours = Field(
        default=72, description="the limit: the default decision applies then (auto_decide: at the SLA)")
    default_decision: Literal["approve", "reject", "request_changes"] = "reject"
    default_reason: str = Field(default="", max_length=1000)

    @model_validator(mode="after")
    def _consistent(self) -> ReviewPolicy:
        if self.action == "reassign" and not self.group:
            raise ValueError("action 'reassign' needs a group")
        if self.decide_after_hours < self.sla_hours:
            raise ValueError("decide_after_hours must not be shorter than sla_hours")
        return self

    def fields_for_new_task(self, now: datetime) -> dict[str, Any]:
        """The ReviewTask fields that state this policy's promise for a task opened now."""
        deadline = now + timedelta(hours=self.sla_hours)
        # auto_decide's limit is the SLA itself; the other actions act at the SLA and decide at the limit.
        decide_by = deadline if self.action == "auto_decide" else now + timedelta(hours=self.decide_after_hours)
        return {
            "sla_deadline": deadline, "escalation_policy": self.action, "policy": self.model_dump(),
            "decide_by": decide_by, "next_sweep_at": deadline,
        }


def policy_for(kind: str, project_settings: dict[str, Any] | None = None) -> ReviewPolicy:
    """The policy a new task of `kind` gets; a broken project override falls back to the settings (logged)."""
    base = _layers(kind, {})
    try:
        return ReviewPolicy.model_validate(_layers(kind, (project_settings or {}).get("review_policies") or {}))
    except (ValidationError, TypeError, AttributeError) as exc:
        log.error("project review_policies for %s are invalid, using the defaults: %s", kind, exc)
        return ReviewPolicy.model_validate(base)


def _layers(kind: str, project: dict[str, Any]) -> dict[str, Any]:
    defaults = settings.AITEAM_REVIEW_POLICIES
    merged: dict[str, Any] = {**defaults.get(ANY_KIND, {})}
    if kind in settings.AITEAM_REVIEW_SLA_HOURS:
        merged["sla_hours"] = settings.AITEAM_REVIEW_SLA_HOURS[kind]
    return {**merged, **defaults.get(kind, {}), **project.get(ANY_KIND, {}), **project.get(kind, {})}


def policy_problems(overrides: Any = None) -> list[str]:
    """What is wrong with the settings' policies and a project's review_policies on top of them, kind by kind."""
    overrides = {} if overrides is None else overrides
    if not isinstance(overrides, dict):
        return ["review_policies must be a mapping of review kind (or '*') to a policy"]
    problems = []
    for kind in overrides:
        if kind != ANY_KIND and kind not in ReviewKind.values:
            problems.append(f"unknown review kind '{kind}'; use '*' or one of {', '.join(ReviewKind.values)}")
    for kind in ReviewKind.values:
        try:
            policy = ReviewPolicy.model_validate(_layers(kind, overrides))
        except (ValidationError, TypeError, AttributeError) as exc:
            problems.append(f"{kind}: {_short(exc)}")
            continue
        problems += _decision_problems(kind, policy)
    return problems


def _decision_problems(kind: str, policy: ReviewPolicy) -> list[str]:
    options = [str(o) for o in REVIEW_OPTIONS.get(kind, [])]
    if options and policy.default_decision not in options:
        return [f"{kind}: default_decision '{policy.default_decision}' is not an option ({', '.join(options)})"]
    if kind == ReviewKind.DEPLOYMENT_APPROVAL and policy.default_decision == Decision.APPROVE:
        return [f"{kind}: a deployment is never approved by policy; use reject"]
    return []


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'policy'}: {e['msg'].removeprefix('Value error, ')}"
                         for e in exc.errors())
    return str(exc)
