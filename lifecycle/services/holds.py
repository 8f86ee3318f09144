"""Why a change waits for a person whatever was pre-authorized (ADR 27, ADR 35, ADR 36): the scope guard flagged
it, or it adds or edits a CI workflow (above all one using `secrets.`). Autonomous decisions at a gate's opening
and the assistant's pre-authorized requests both ask here, so neither can approve what the other may not."""
from __future__ import annotations

from typing import Any

from agents.ci_paths import devops_owned
from agents.schemas import SourceFile
from lifecycle.models import ReviewTask
from lifecycle.services.development import workspace_files
from lifecycle.services.scope_guard import recorded_scope

SECRETS = "secrets."


def change_hold(task: ReviewTask) -> str:
    """Why the change to deploy needs a person whatever was pre-authorized (the scope guard, CI workflows), or ""."""
    if held := scope_hold(task.context.get("scope") or recorded_scope(task.requirement_id)):
        return held
    # A new project's files are all the change's; on an existing repository, the files it adds or changes.
    return ci_hold(workspace_files(task.requirement_id))


def scope_hold(scope: dict[str, Any] | None) -> str:
    """Why the scope guard wants a person for this change (over the project's limits, CI, dependency or settings
    files: lifecycle/services/scope_guard.py), or ""; a new project's run has no measure."""
    reasons = (scope or {}).get("reasons") or []
    return f"the scope guard flagged the change: {'; '.join(reasons)}" if reasons else ""


def ci_hold(changed: list[SourceFile]) -> str:
    """Why a change to these files needs a person: a CI workflow it adds or edits, above all one using secrets."""
    ci = [f for f in changed if devops_owned(f.path)]
    using_secrets = [f.path for f in ci if SECRETS in f.content]
    if using_secrets:
        return f"the change's CI workflows use {SECRETS} ({', '.join(using_secrets)})"
    if ci:
        return f"the change adds or edits CI workflows ({', '.join(f.path for f in ci)})"
    return ""
