"""The work of the steps on an existing repository (docs/adr/0035), run by lifecycle/runner.py outside any
transaction: the preparation (mirror, base commit, environment, the two base runs) and the runs after a change,
judged against the baseline. Reads the database and the disk, writes nothing but the base commit (recorded as
soon as it is known, so a step run again branches from the same one); the services record the outputs.
"""
from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings

from agents.delivery import RemoteRefused
from agents.environments import BadDependencies, BadTestCommand, InstallFailed, NotPython, PackageSources, TestCommand
from agents.environments.export import export_commit
from agents.environments.repository import (
    BaselineUnusable,
    judged_report,
    judged_run,
    prepare_repository,
    recorded_command,
    recorded_environment,
)
from agents.environments.wheels import runner_wheelhouse
from agents.repo.files import RepoIndexError, git
from agents.repo.mirror import MirrorError
from agents.runner_reach import reach_findings
from agents.sandbox import SandboxLimits
from agents.sandbox.runner import RepoRun
from agents.schemas.engineering import engineer_may_not_write
from agents.workspace import Workspace
from lifecycle.errors import DomainError
from lifecycle.models import Requirement
from lifecycle.services.development import ensure_not_timed_out, workspace_aligned
from lifecycle.services.preparation import RepositoryUnusable, base_record, baseline_of, unusable
from lifecycle.services.repositories import mirror_for, project_remote

# A repository that cannot be prepared as it stands, or a project setting that does not fit it: for a person.
UNUSABLE = (NotPython, BadTestCommand, BadDependencies, InstallFailed, BaselineUnusable, MirrorError, DomainError,
            RepositoryUnusable)


def prepare(requirement: Requirement, *, limits: SandboxLimits) -> dict[str, Any]:
    """repo_prepare's output: the baseline (agents.environments.repository.prepare_repository) with the base commit
    and the branch, or `preparation.unusable` saying why the repository cannot be prepared."""
    try:
        base_sha = _base_commit(requirement)
        workspace = workspace_aligned(requirement.pk)
        prepared = prepare_repository(workspace.path, configured=requirement.project.settings.get("test_command"),
                                      cache_dir=settings.AITEAM_ENVIRONMENTS_ROOT, sources=package_sources,
                                      limits=limits)
    except UNUSABLE as exc:  # a base run stopped at the time limit too: the suite's size, which a retry would not cure
        return unusable(str(exc), error=exc, log_tail=getattr(exc, "log_tail", ""))
    return {"ok": True, "base_sha": base_sha, "branch": workspace.branch, **prepared}


def judged(requirement: Requirement, workspace: Workspace, *, limits: SandboxLimits, qc_files: Sequence[str] = (),
           reproduce: bool = False) -> dict[str, Any]:
    """The workspace's tests (and QC's files) in the baseline's environment, judged per test against the
    baseline. With `reproduce` (a bug), QC's files also run on the base commit: each of their tests must fail
    there and pass here (fail-to-pass)."""
    prepared = baseline_of(requirement)
    qc_files = [path for path in qc_files if (workspace.path / path).is_file()]
    root = Path(settings.AITEAM_ENVIRONMENTS_ROOT)
    root.mkdir(parents=True, exist_ok=True)
    left_out: list[str] = []  # links out of the tree, not written to the base commit's copy
    with tempfile.TemporaryDirectory(prefix="base-", dir=root) as scratch:
        def base_tree(name: str = "tree", files: dict[str, bytes] | None = None) -> Path:
            return export_commit(workspace.path, requirement.base_sha, Path(scratch) / name, files, skipped=left_out)

        environment = recorded_environment(prepared, cache_dir=root, base_tree=base_tree,
                                           sources=package_sources(recorded_command(prepared)))
        after = _checked(judged_run(workspace.path, prepared, environment, limits=limits, extra_paths=qc_files))
        if not reproduce:
            return judged_report(after, prepared, limits=limits)
        with_tests = base_tree("with-qc-tests", {path: (workspace.path / path).read_bytes() for path in qc_files})
        at_base = _checked(judged_run(with_tests, prepared, environment, limits=limits, only=qc_files))
    reproductions = [test for test in after.outcomes if test.split("::", 1)[0] in qc_files]
    report = judged_report(after, prepared, reproductions=reproductions, at_base=at_base, limits=limits)
    if left_out:  # a reproduction that fails at base for want of one of them would not show the bug
        report["comparison"]["left_out_at_base"] = sorted(set(left_out))
    return report


def changed_files_reach(workspace: Workspace) -> list[str]:
    """The runner check (ADR 25) over the Python files the change added or changed (QC's excepted, as on a new
    project): the repository's own code and style before the change are not this run's to judge, so no ruff."""
    return reach_findings((f.path, f.content) for f in workspace.files()
                          if f.path.endswith(".py") and not engineer_may_not_write(f.path))


def _base_commit(requirement: Requirement) -> str:
    """The recorded base commit, or the base branch's commit now (the mirror fetched under its lock), recorded."""
    project = requirement.project
    try:
        project_remote(project).checked_url()
    except RemoteRefused as exc:  # its message names the URL without credentials
        raise RepositoryUnusable(
            f"the project's repository is refused before any git command: {exc}. An admin of the organization sets "
            "the project's repo_url to an allowed remote (docs/operations.md, Delivery), then retries") from None
    if requirement.base_sha:
        return requirement.base_sha
    mirror = mirror_for(project)
    with mirror.locked():
        try:
            sha = mirror.sync(project.base_branch)
        except MirrorError as exc:  # fetched, but no such branch: an empty repository has none at all
            if str(exc).startswith("the repository has no branch") and not _has_branches(mirror.path):
                raise RepositoryUnusable(
                    f"the repository has no branch {project.base_branch!r} yet (it is empty): push an initial commit "
                    f"to it, or remove the project's repo_url to start a new project from nothing ({exc})") from None
            raise
    requirement.base_sha = base_record(requirement_id=requirement.pk, sha=sha)
    return requirement.base_sha


def _has_branches(mirror: Path) -> bool:
    try:
        return bool(git(mirror, "for-each-ref", "--count=1", "refs/heads/").strip())
    except RepoIndexError:
        return False


def package_sources(command: TestCommand) -> PackageSources:
    """The operator's index and wheel folders, and the runner's wheelhouse for what the repository lacks."""
    wheels = runner_wheelhouse(settings.AITEAM_ENVIRONMENTS_ROOT, ("pytest", *command.plugins))
    return PackageSources(index_url=settings.AITEAM_PIP_INDEX_URL or None,
                          find_links=tuple(settings.AITEAM_PIP_FIND_LINKS), runner_wheels=wheels)


def _checked(run: RepoRun) -> RepoRun:
    """A run the sandbox stopped at its time limit says nothing of the change: raised, retried (infrastructure)."""
    ensure_not_timed_out(run.report.to_dict())
    return run

