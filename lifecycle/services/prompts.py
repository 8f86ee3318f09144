"""The prompt bundles of a project: its version (the bundle a promotion pinned, or the shipped files) and the bundle
a requirement starts with (that version, completed with the shipped file of any prompt it lacks)."""
from __future__ import annotations

from agents.prompts import bundle_hash, prompt_files
from lifecycle.errors import DomainError, echoed_names
from lifecycle.models import Project, PromptBundle


def project_bundle(project: Project, *, drop_unknown: bool = False) -> PromptBundle:
    """The project's prompt version: exactly the prompts pinned in its settings (ADR 39: a prompt file the deployment
    adds later is not in it, so its version id stays), or the shipped files when none are pinned. `drop_unknown`:
    leave out pinned prompts this deployment no longer ships (a promotion's starting point) instead of refusing them."""
    return _stored(_pinned(project, drop_unknown) or prompt_files())


def prompt_bundle_for(project: Project) -> PromptBundle:
    """The bundle a requirement starts with: the project's version, and for a prompt it lacks (a role shipped after
    the version was pinned) the shipped file, so every prompt the requirement uses is fixed at submission."""
    return _stored({**prompt_files(), **_pinned(project, False)})


def _pinned(project: Project, drop_unknown: bool) -> dict[str, str]:
    files = prompt_files()
    pinned = project.settings.get("prompts") or {}
    if drop_unknown:
        pinned = {name: text for name, text in pinned.items() if name in files}
    unknown = sorted(set(pinned) - set(files))
    if unknown or not all(isinstance(text, str) and text.strip() for text in pinned.values()):
        raise DomainError("project prompt overrides must be non-empty texts for known prompts; "
                          f"unknown: [{echoed_names(unknown)}]", "project")
    return pinned


def _stored(prompts: dict[str, str]) -> PromptBundle:
    return PromptBundle.objects.get_or_create(sha256=bundle_hash(prompts), defaults={"prompts": prompts})[0]
