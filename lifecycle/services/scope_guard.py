"""The scope guard (docs/adr/0035): on an existing repository, the change is measured from its merge base at the
deployment approval, against the project's limits.

Over `settings["scope"]` (default 300 lines changed, 2 top-level modules), or touching CI, dependency or repository
settings files, the change is flagged: the review page shows why and autonomous mode leaves it to a person. A change
with nothing in it (the branch holds no difference from its base) is not a change to deliver at all: the gate that
would ask for its approval fails instead, with `EMPTY_CHANGE`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.repo.scope import Scope, ScopeLimits
from lifecycle.errors import DomainError
from lifecycle.models import Project, Requirement
from lifecycle.repo_settings import scope_values
from lifecycle.services.artifacts import artifact_store, content_json, latest
from lifecycle.services.development import workspace_for
from lifecycle.states import ArtifactKind

EMPTY_CHANGE = "the change is empty: nothing differs from the base commit"
SCOPE_ROLE = "scope_guard"


class EmptyChange(DomainError):
    """The requirement's branch holds no change from its base commit: there is nothing to approve or deliver."""


@dataclass(frozen=True)
class ScopeCheck:
    scope: Scope
    limits: ScopeLimits
    merge_base: str
    head: str

    @property
    def reasons(self) -> list[str]:
        return self.scope.reasons(self.limits)

    @property
    def flagged(self) -> bool:
        return bool(self.reasons)

    def to_dict(self) -> dict[str, Any]:
        added = sum(f.added for f in self.scope.files)
        return {**self.scope.to_dict(), "lines_added": added, "lines_removed": self.scope.lines_changed - added,
                "reasons": self.reasons, "flagged": self.flagged, "merge_base": self.merge_base, "head": self.head,
                "limits": {"max_lines": self.limits.max_lines, "max_modules": self.limits.max_modules}}


def scope_limits(project: Project) -> ScopeLimits:
    """The project's `settings["scope"]`, defaults for what it leaves out; a value that is not a positive whole
    number is refused with the key that holds it (a guard that silently fell back would guard nothing)."""
    try:
        return ScopeLimits(**scope_values(project.settings.get("scope") or {}))
    except ValueError as exc:
        raise DomainError(str(exc), "settings") from None


def scope_measure(requirement: Requirement) -> ScopeCheck:
    """The requirement's committed change (the commit the database records) from the merge base, with the limits."""
    workspace = workspace_for(requirement)
    workspace.align(requirement.workspace_head)  # "": nothing committed yet, the base commit
    change = workspace.change()
    return ScopeCheck(change.scope, scope_limits(requirement.project), change.merge_base, change.head)


def scope_record(requirement: Requirement) -> ScopeCheck:
    """Measure the change and store it (ArtifactKind.SCOPE, one version per head: a re-run stores nothing new);
    an empty change raises EmptyChange. The caller holds the requirement's lock."""
    check = scope_measure(requirement)
    if check.scope.empty:
        raise EmptyChange(EMPTY_CHANGE, "change")
    stored = latest(requirement, ArtifactKind.SCOPE, "scope")
    if stored is None or stored.metadata.get("head") != check.head:
        summary = "; ".join(check.reasons) or f"{check.scope.lines_changed} lines, {len(check.scope.modules)} modules"
        artifact_store(requirement, kind=ArtifactKind.SCOPE, name="scope", content=check.to_dict(), summary=summary,
                       metadata={"head": check.head, "flagged": check.flagged, "lines": check.scope.lines_changed},
                       role=SCOPE_ROLE)
    return check


def empty_change_problem(requirement: Requirement) -> str:
    """EMPTY_CHANGE when a repository requirement's branch holds nothing beyond its base, else "" (a gate's check:
    it fails the gate rather than opening an approval of nothing). A new project's run is never measured."""
    if not requirement.base_sha:
        return ""
    return EMPTY_CHANGE if scope_measure(requirement).scope.empty else ""


def recorded_scope(requirement_id: Any) -> dict[str, Any] | None:
    """The newest stored measure of the requirement's change, or None (a new project's run, or not measured yet)."""
    requirement = Requirement.objects.get(pk=requirement_id)
    stored = latest(requirement, ArtifactKind.SCOPE, "scope")
    return content_json(stored) if stored is not None else None


def review_summary(check: ScopeCheck) -> dict[str, Any]:
    """What the deployment approval's page shows of the scope (kept on the task: it is what was approved)."""
    data = check.to_dict()
    return {key: data[key] for key in ("lines_changed", "lines_added", "lines_removed", "modules", "ci_files",
                                       "dependency_files", "settings_files", "reasons", "flagged", "limits")} | {
        "files": len(check.scope.files)}
