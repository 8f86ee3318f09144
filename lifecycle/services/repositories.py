"""A project's repository as the worker reaches it: the remote (with the operator's rule), the host token, the
cached mirror, and a requirement's workspace branched from the base commit it recorded (docs/adr/0031, 0035).

A project without `repo_url` is a new project: its remote is a local bare repository the embedded default makes,
and its runs start from an empty history (`agents.workspace.Workspace`). A project with one is an existing
repository: each requirement records the base branch's commit in its first repository step (`base_sha`) and
works in a clone of the mirror on its own branch (`agents.repo.workspace.RepoWorkspace`).
"""
from __future__ import annotations

from pathlib import Path

from django.conf import settings

from agents.delivery import Remote, ensure_bare_remote
from agents.delivery.credentials import HostAuth
from agents.repo.mirror import Mirror
from agents.repo.refs import branch_name
from agents.repo.workspace import RepoWorkspace
from lifecycle.errors import DomainError
from lifecycle.models import Project, Requirement
from lifecycle.services.host_settings import token_of
from lifecycle.tickets import TicketSource


def remote_url(requirement: Requirement) -> str:
    """The project's remote, or a local bare repository for the embedded default (created on first use)."""
    return project_remote(requirement.project).url


def project_remote(project: Project) -> Remote:
    """The remote delivery pushes to, with the operator's rule that git_remote checks before every git call."""
    if not project.repo_url:  # the operator's own place for default remotes, whatever AITEAM_GIT_LOCAL_ROOT says
        path = ensure_bare_remote(default_remote_path(project))
        return Remote(path, local_root=Path(settings.AITEAM_REMOTES_ROOT), own_path=_own_path(project))
    return tenant_remote(project, project.repo_url)


def tenant_remote(project: Project, url: str) -> Remote:
    """`url` as the project's repo_url, under the operator's rule: `tenant_remote(p, url).refusal()` is None when
    it may be saved (the Project admin) and delivered to. Over ssh only with the key the operator bound to the
    project's organization (AITEAM_SSH_IDENTITIES), read where it is used: the operator may unbind it."""
    return Remote(url, hosts=tuple(settings.AITEAM_GIT_HOSTS), local_root=settings.AITEAM_GIT_LOCAL_ROOT,
                  own_path=_own_path(project), ssh_key=ssh_key_of(project))


def ssh_key_of(project: Project) -> Path | None:
    """The ssh key the operator bound to the project's organization, or None."""
    if project.organization_id is None:
        return None
    return settings.AITEAM_SSH_IDENTITIES.get(project.organization.slug)


def _own_path(project: Project) -> str:
    return f"{project.organization_id}/{project.pk}.git"


def default_remote_path(project: Project) -> Path:
    """<AITEAM_REMOTES_ROOT>/<organization id>/<project id>.git: one repository per project, whatever the slugs.

    Not the slugs: joined as "<org>-<project>" they collide across tenants ("a-b"/"c" and "a"/"b-c"), they are
    not validated on every path in (a management command saves them as typed, "/" included) and an admin may
    rename them. Ids are unique and never change. Remotes created under the older "<org slug>-<project
    slug>.git" name are left where they are and no longer written: the next delivery pushes its branch to the
    new repository; an operator who wants the old branches there moves or pushes them by hand."""
    return Path(settings.AITEAM_REMOTES_ROOT) / _own_path(project)


def host_auth(project: Project) -> HostAuth | None:
    """The token for the project's https remote, read from the variable the project names when the operator's
    AITEAM_TOKEN_ENVS allows it; None when the project names none (a public or local repository). Handed to git
    through its environment only (agents/delivery/credentials.py), never put in a URL, a row or a log."""
    if not project.token_env:
        return None
    return HostAuth.for_host(project.host_kind, token_of(project, project.token_env), ca_file=settings.AITEAM_GIT_CA_FILE)


def mirror_for(project: Project) -> Mirror:
    """The project's cached bare copy, one per project: <AITEAM_MIRROR_ROOT>/<project id>.git."""
    return Mirror(Path(settings.AITEAM_MIRROR_ROOT) / f"{project.pk}.git", project_remote(project), host_auth(project))


def requirement_branch(requirement: Requirement) -> str:
    """The requirement's branch, on a new project as on an existing repository, named the first time it is needed
    and kept (a running requirement never moves to another, whatever its title becomes): aiteam/<ticket key>-<slug>
    for a ticket the tracker's signed webhook delivered or the operator typed at the terminal (aiteam_ticket; the
    API refuses "cli"), so the ticket's next run delivers onto its last one; aiteam/<id prefix>-<slug> for anything
    else, a brief or a member's ticket whatever key it names (ADR 42: a member cannot take the branch the tracker's
    delivery of an issue pushes)."""
    if not requirement.branch:
        keyed = requirement.ticket_via_webhook or requirement.ticket_source == TicketSource.CLI
        key = requirement.ticket_key if keyed else str(requirement.pk)[:8]
        named = branch_name(key, requirement.title or "requirement")
        Requirement.objects.filter(pk=requirement.pk, branch="").update(branch=named)
        requirement.branch = Requirement.objects.values_list("branch", flat=True).get(pk=requirement.pk)
    return requirement.branch


def repository_workspace(requirement: Requirement) -> RepoWorkspace:
    """The requirement's clone of the mirror on its branch, at the base commit it recorded: cloned again when it
    is missing (another machine, a cleaned disk), fetched only when the mirror lacks that commit."""
    if not requirement.base_sha:
        raise DomainError("the requirement has not branched from its repository yet (no base commit)", "base_sha")
    return RepoWorkspace.open(mirror_for(requirement.project), Path(settings.AITEAM_WORKSPACE_ROOT) / str(requirement.pk),
                              branch=requirement_branch(requirement), base=requirement.project.base_branch,
                              base_sha=requirement.base_sha)
