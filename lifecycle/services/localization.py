"""Localization on an existing repository (docs/adr/0035): the Tech Lead's choice of files and definitions to
change or read is stored, and the plan is made from it."""
from __future__ import annotations

from agents.schemas import LocalizationOutput
from lifecycle import step_keys
from lifecycle.actors import Actor
from lifecycle.services.artifacts import artifact_store
from lifecycle.services.leases import Lease, step_applying
from lifecycle.services.outbox import emit
from lifecycle.services.scheduling import step_schedule
from lifecycle.states import ArtifactKind

TECH_LEAD = Actor.agent("tech_lead")
NAME = "localization"


def localize_apply(*, lease: Lease, output: LocalizationOutput) -> None:
    """The localization as an artifact (files, symbols, reasons, at the commit it was made from), then the plan.
    Applied once under the step's fence; the plan's step is scheduled once whatever re-runs."""
    with step_applying(lease) as (step, requirement):
        files = [f.model_dump() for f in output.files]
        artifact_store(requirement, kind=ArtifactKind.LOCALIZATION, name=NAME,
                       content={"reasoning": output.reasoning, "files": files},
                       summary=", ".join(f"{f.action} {f.path}" for f in output.files),
                       metadata={"attempt": lease.attempt, "commit": requirement.workspace_head or requirement.base_sha,
                                 "paths": [f.path for f in output.files]}, step=step, role=TECH_LEAD.role)
        emit(requirement, "CodeLocalized", {"attempt": lease.attempt, "files": [
            {"path": f.path, "action": f.action, "symbols": f.symbols} for f in output.files]})
        step_schedule(requirement_id=requirement.pk, key=step_keys.PLAN, attempt=1)
