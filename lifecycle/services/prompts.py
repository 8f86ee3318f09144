"""The prompt bundle a requirement starts with: the files, with the project's overrides applied."""
from __future__ import annotations

from agents.prompts import bundle_hash, prompt_files
from lifecycle.errors import DomainError, echoed_names
from lifecycle.models import Project, PromptBundle


def prompt_bundle_for(project: Project, *, drop_unknown: bool = False) -> PromptBundle:
    """`drop_unknown`: leave out overrides of prompts this deployment no longer ships (a promotion's starting point,
    ADR 39) instead of refusing them (submission refuses them)."""
    prompts = prompt_files()
    overrides = project.settings.get("prompts") or {}
    if drop_unknown:
        overrides = {name: text for name, text in overrides.items() if name in prompts}
    unknown = sorted(set(overrides) - set(prompts))
    if unknown or not all(isinstance(text, str) and text.strip() for text in overrides.values()):
        raise DomainError("project prompt overrides must be non-empty texts for known prompts; "
                          f"unknown: [{echoed_names(unknown)}]", "project")
    prompts.update(overrides)
    bundle, _ = PromptBundle.objects.get_or_create(sha256=bundle_hash(prompts), defaults={"prompts": prompts})
    return bundle
