"""Run one ticket on an existing repository (docs/adr/0035) and print what happened: the steps and gates, the
branch and the pull request (or the local remote), the diff from the merge base, its scope, and the tests before
and after.

    .venv/bin/python manage.py aiteam_ticket --repo PATH_OR_URL --base main --title "..." --body-file ticket.md \\
        [--cassette FILE] [--project SLUG] [--key KEY] [--host github|gitlab|git] [--token-env NAME]
        [--api-url URL] [--approve-deployment]

The repository's project is made (or found) in the operator's organization: a local PATH is copied, its base
branch with its history, into the project's own bare repository under AITEAM_GIT_LOCAL_ROOT
(<organization id>/<project id>.git, the only local remote the operator's rule allows) and the project's repo_url
points there; a URL becomes the repo_url as it is, if the operator's rule allows it (AITEAM_GIT_HOSTS), and on a
GitHub or GitLab host the repository its path names is where the pull (merge) request is opened, through --api-url
or the host's own API, with the token --token-env names (one of AITEAM_TOKEN_ENVS). Running the command again
refreshes the copy's base branch and, while the ticket's run is live, reports that run instead of starting another
(one live requirement per ticket).

--cassette answers the model's requests from a recorded cassette (docs/cassettes.md) instead of the configured
provider. A user's mistake (no such file or directory, a refused URL, a missing branch, a request the cassette did
not record) ends in one line saying what to do and a non-zero exit status, never a traceback."""
from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug
from django.db import transaction
from django.test.utils import override_settings

from agents.delivery.api import ApiUrlRefused, checked_api_url
from agents.delivery.errors import scrub
from agents.delivery.pr_body import change_title
from agents.delivery.remotes import repository_path
from agents.repo.scope import measure
from lifecycle.errors import DomainError, NotPermitted
from lifecycle.management.commands.aiteam_demo import CONFIG_ERRORS
from lifecycle.models import Membership, Organization, Project, Requirement
from lifecycle.repo_settings import HostKind, validate_branch_name
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.autonomous import deployment_approve_at_terminal
from lifecycle.services.change_facts import ticket_ref
from lifecycle.services.development import workspace_for
from lifecycle.services.promotions import project_settings_save
from lifecycle.services.repositories import tenant_remote
from lifecycle.services.tickets import ticket_submit
from lifecycle.states import ArtifactKind, Role, StepState
from lifecycle.tickets import Ticket, TicketSource, ticket_problems

ORGANIZATION = "local"  # the operator's organization for repositories run from the terminal
OPERATOR = "operator"
URL_LIKE = re.compile(r"^[a-z][a-z0-9+.-]*://|^[^/@\s]+@[^/:\s]+:")  # scheme://… or user@host:path
DIFF_LINES = 400  # printed; the whole diff is in the workspace and on the pull request
GIT_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
           "LANG": "C.UTF-8"}


class Command(BaseCommand):
    help = ("Run a ticket on an existing repository (a local path, copied into the project's own remote, or an "
            "allowed URL) and print its steps, branch, pull request, diff, scope and tests before and after.")

    def add_arguments(self, parser):
        parser.add_argument("--repo", required=True, metavar="PATH_OR_URL", help=(
            "a local git repository (copied into the project's own bare remote under AITEAM_GIT_LOCAL_ROOT) or an "
            "https:// or ssh:// URL on a host of AITEAM_GIT_HOSTS"))
        parser.add_argument("--base", default="main", help="the branch the change starts from and is proposed to")
        parser.add_argument("--title", required=True, help="the ticket's title")
        parser.add_argument("--body-file", required=True, type=Path, metavar="FILE",
                            help="a UTF-8 text file holding the ticket's body: what is wrong or wanted, in plain words")
        parser.add_argument("--cassette", type=Path, metavar="FILE", help=(
            "answer the model's requests from this replay cassette (docs/cassettes.md) instead of the provider "
            "configured by AITEAM_LLM_PROVIDER / ANTHROPIC_API_KEY"))
        parser.add_argument("--project", metavar="SLUG", help="the project's slug (default: the repository's name)")
        parser.add_argument("--key", help="the ticket's key (default: derived from the title and body, so running "
                            "the same ticket again finds its run)")
        parser.add_argument("--host", choices=HostKind.values, help="the remote's kind (default: from the URL's host)")
        parser.add_argument("--token-env", default="", metavar="NAME",
                            help="the variable holding the host's token (one of AITEAM_TOKEN_ENVS)")
        parser.add_argument("--api-url", metavar="URL", help=(
            "the host's API for the pull or merge request, one of AITEAM_GITHUB_API_URLS or AITEAM_GITLAB_URLS "
            "(default: https://api.github.com for github.com, https://HOST/api/v3 for another GitHub host, "
            "https://HOST for GitLab)"))
        parser.add_argument("--approve-deployment", action="store_true", help=(
            "approve the deployment gate yourself, as the operator at this terminal, when autonomous mode leaves it "
            "to a person; without it the run stops at ready_to_deploy with the task in the review inbox"))

    def handle(self, *args, repo, base, title, body_file, cassette=None, project=None, key=None, host=None,
               token_env="", api_url=None, approve_deployment=False, **options):
        body = read_body(Path(body_file))  # a Path from the command line, maybe a str from call_command
        _check_branch(base)
        ticket = Ticket(source=TicketSource.CLI, key=key or ticket_key(title, body), title=title.strip(), body=body)
        if problems := ticket_problems(ticket):
            raise CommandError("; ".join(f"{field}: {problem}" for field, problem in problems.items()))
        # the provider is read from settings at each model call (agents/llm/factory.py): overridden for this run only
        with override_settings(**_cassette_settings(Path(cassette) if cassette else None)):
            user, organization = operator()
            project_row = project_for(organization, repo=repo, base=base, slug=project, host=host, token_env=token_env,
                                      api_url=api_url, say=self.stdout.write)
            self.stdout.write(f"Project {organization.slug}/{project_row.slug}: {project_row.repo_url} "
                              f"(base {project_row.base_branch})")
            if warning := unisolated_warning():
                self.stdout.write(warning)
            requirement = self._submit(user, ticket, project_row)
            if approve_deployment:
                self._approve_deployment(requirement, user)
            self._report(Requirement.objects.get(pk=requirement.pk))

    def _submit(self, user, ticket: Ticket, project: Project) -> Requirement:
        if not settings.CELERY_TASK_ALWAYS_EAGER:
            self.stdout.write("Celery is not eager: steps run on your workers; this command only submits and reports.")
        try:
            submitted = ticket_submit(user=user, ticket=ticket, project=project)
        except (DomainError, NotPermitted) as exc:
            raise CommandError(str(exc)) from None
        requirement = submitted.requirement
        if submitted.live:
            self.stdout.write(f"Ticket {ticket.key} already has a live run ({requirement.pk}): reporting it.")
        failed = _failed_step(requirement)
        if failed is not None and failed.error.startswith(CONFIG_ERRORS):  # its message says what to do
            raise CommandError(f"step {failed.key}: {failed.error.partition(': ')[2]}")
        return requirement

    def _approve_deployment(self, req: Requirement, user) -> None:
        if held := deployment_approve_at_terminal(req, user, command="aiteam_ticket"):
            self.stdout.write(f"\nDeployment approval waits for a person ({held}): approving it as {user.username} "
                              "(--approve-deployment).")

    def _report(self, req: Requirement) -> None:
        out = self.stdout.write
        out(f"\n=== Ticket {req.ticket_key}: {req.title}\nrequirement {req.pk}, playbook {req.playbook}, "
            f"state {req.state}")
        out("\n--- Steps")
        for step in req.steps.order_by("id"):
            error = f" — {step.error.splitlines()[0]}" if step.error else ""
            out(f"{step.key:<24} #{step.attempt} {step.state}{error}")
        out("\n--- Gates")
        for task in req.review_tasks.order_by("created_at"):
            out(f"{task.kind:<22} round {task.round} {task.state}")
        self._report_delivery(req)
        self._report_change(req)
        self._report_tests(req)
        if req.state != "deployed":
            failed = _failed_step(req)
            why = f": step {failed.key}#{failed.attempt} failed: {failed.error}" if failed else ""
            raise CommandError(f"the ticket's run did not reach deployed (state {req.state}){why}")

    def _report_delivery(self, req: Requirement) -> None:
        delivered = latest(req, ArtifactKind.DELIVERY, "delivery")
        if delivered is None:
            return
        result = content_json(delivered)
        self.stdout.write(f"\n--- Delivered: {'yes' if result.get('succeeded') else 'NO: ' + str(result.get('error'))}")
        self.stdout.write(f"remote: {result.get('remote_url')}\nbranch: {result.get('branch')}")
        request = result.get("pull_request")  # a pull request on GitHub, a merge request on GitLab; none locally
        if isinstance(request, dict):
            draft = " (draft)" if request.get("draft") else ""
            self.stdout.write(f"pull request #{request.get('number')}: {request.get('url')}{draft}\n"
                              f"title: {change_title(ticket_ref(req), req.title or req.brief[:60])}")
        elif not request:
            self.stdout.write(f"no pull request: the branch is in the project's remote; git clone -b "
                              f"{result.get('branch')} {result.get('remote_url')}")

    def _report_change(self, req: Requirement) -> None:
        if not req.base_sha:
            return
        change = workspace_for(req).change()
        recorded = latest(req, ArtifactKind.SCOPE)
        scope = recorded.summary if recorded else _scope_line(change.diff)
        self.stdout.write(f"\n--- Change {change.merge_base[:10]}..{change.head[:10]}\nscope: {scope}")
        lines = change.diff.splitlines()
        self.stdout.write("\n".join(lines[:DIFF_LINES]) or "(no change from the merge base)")
        if len(lines) > DIFF_LINES:
            self.stdout.write(f"… {len(lines) - DIFF_LINES} more lines: git diff {change.merge_base[:10]} "
                              f"{change.head[:10]} in the workspace")

    def _report_tests(self, req: Requirement) -> None:
        out = self.stdout.write
        out("\n--- Tests")
        baseline = latest(req, ArtifactKind.BASELINE)
        out(f"before (base commit): {baseline.summary if baseline else 'no baseline recorded'}")
        for name, label in (("self_test", "after (engineer's self-test)"), ("qc", "after (QC's run)")):
            report = latest(req, ArtifactKind.TEST_REPORT, name)
            out(f"{label}: {report.summary if report else 'not run'}")
        qc = latest(req, ArtifactKind.TEST_REPORT, "qc")
        for check in ((content_json(qc).get("comparison") or {}).get("reproductions") or []) if qc else []:
            out(f"  QC's reproduction {check.get('test')}: {check.get('at_base')} at the base commit, "
                f"{check.get('after')} after the change{'' if check.get('ok') else ' (not a reproduction)'}")
        if isolation := _isolation(req):
            out(f"sandbox: {isolation}")


def unisolated_warning() -> str:
    """The line to print before the run when this process runs the repository's tests (Celery eager) and cannot
    isolate them: bubblewrap and the drop to an unprivileged uid both need root (agents/sandbox/isolation.py). The
    repository is someone's existing code: its conftest.py runs at collection, before any test."""
    if not settings.CELERY_TASK_ALWAYS_EAGER or os.geteuid() == 0:
        return ""
    if settings.AITEAM_SANDBOX_ALLOW_UNISOLATED:
        return (f"sandbox: NOT isolated: you are not root (uid {os.geteuid()}), so the repository's tests, its "
                "conftest.py included, run as you, with the network and your files "
                "(AITEAM_SANDBOX_ALLOW_UNISOLATED is on); run as root with bubblewrap to isolate them")
    return (f"sandbox: unavailable: you are not root (uid {os.geteuid()}) and AITEAM_SANDBOX_ALLOW_UNISOLATED is "
            "off, so the repository's tests will be refused; run as root with bubblewrap")


def _isolation(req: Requirement) -> str:
    """How the last run of the repository's tests was isolated, as the sandbox recorded it ("" before any run)."""
    for name in ("qc", "self_test"):
        if (report := latest(req, ArtifactKind.TEST_REPORT, name)) and content_json(report).get("isolation"):
            return content_json(report)["isolation"]
    baseline = latest(req, ArtifactKind.BASELINE)
    reports = (content_json(baseline).get("reports") or []) if baseline else []
    return next((r["isolation"] for r in reversed(reports) if isinstance(r, dict) and r.get("isolation")), "")


def read_body(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise CommandError(f"no body file {path}: give --body-file a text file holding the ticket's body") from None
    except UnicodeDecodeError:
        raise CommandError(f"the body file {path} is not UTF-8 text: save it as UTF-8") from None
    except OSError as exc:
        raise CommandError(f"cannot read the body file {path}: {exc.strerror or exc}") from None
    if not text:
        raise CommandError(f"the body file {path} is empty: write what is wrong or wanted in it, in plain words")
    return text


def ticket_key(title: str, body: str) -> str:
    """A key for a ticket typed at the terminal: the same title and body give the same key (and so the live run)."""
    return "cli-" + hashlib.sha256(f"{title.strip()}\n{body.strip()}".encode()).hexdigest()[:8]


def operator() -> tuple[Any, Organization]:
    """The terminal's user, an admin of the operator's organization."""
    organization, _ = Organization.objects.get_or_create(slug=ORGANIZATION, defaults={"name": "Local repositories"})
    user, _ = get_user_model().objects.get_or_create(username=OPERATOR)
    Membership.objects.update_or_create(user=user, organization=organization, defaults={"role": Role.ADMIN})
    return user, organization


def project_for(organization: Organization, *, repo: str, base: str, slug: str | None = None, host: str | None = None,
                token_env: str = "", api_url: str | None = None, say: Callable[[str], object] = lambda line: None
                ) -> Project:
    """The repository's project, made on first use; its repo_url the URL, or the project's own copy of a PATH.
    Nothing is saved when the operator's rule refuses the remote or the API, or a field is invalid."""
    source = None if URL_LIKE.match(repo) else Path(repo).expanduser().resolve()
    if source is not None and not _is_repository(source):
        raise CommandError(f"--repo {repo}: not a git repository (give a local clone, a bare repository or a URL)")
    slug = slug or _slug(repo)
    try:
        validate_slug(slug)
        with transaction.atomic():
            project, _ = Project.objects.get_or_create(organization=organization, slug=slug,
                                                       defaults={"name": slug, "base_branch": base})
            repo_url = str(import_local(source, own_remote(project), base=base, say=say)) if source else repo
            if reason := tenant_remote(project, repo_url).refusal():
                raise CommandError(f"--repo {repo}: the operator's rule refuses it: it {reason}")
            project.repo_url, project.base_branch, project.token_env = repo_url, base, token_env
            project.host_kind = host or _host_kind(repo_url)
            if source is None:
                project.settings = {**project.settings, **change_request_settings(project.host_kind, repo, api_url)}
            project.full_clean()
            project_settings_save(project)
    except ValidationError as exc:
        raise CommandError(f"project {slug!r}: {'; '.join(exc.messages)}") from None
    return project


def change_request_settings(host_kind: str, url: str, api_url: str | None) -> dict[str, Any]:
    """Where the pull (merge) request of a remote on GitHub (GitLab) is opened: the repository the URL's path names,
    through `api_url` or the host's own API, which must be on the operator's list; nothing for a plain git host."""
    host, path = _host(url), repository_path(url)  # owner/name, group/name
    if host_kind == HostKind.GITHUB:
        default = "https://api.github.com" if host == "github.com" else f"https://{host}/api/v3"
        return {"github": {"repository": path, "api_url": _api_url(api_url or default, "AITEAM_GITHUB_API_URLS")}}
    if host_kind == HostKind.GITLAB:
        return {"gitlab": {"project": path, "url": _api_url(api_url or f"https://{host}", "AITEAM_GITLAB_URLS")}}
    return {}


def _api_url(url: str, setting: str) -> str:
    try:
        return checked_api_url(url, getattr(settings, setting), setting)
    except ApiUrlRefused as exc:
        raise CommandError(f"--api-url: {exc}: the operator adds it to {setting}, or give --api-url") from None


def _is_repository(path: Path) -> bool:
    """A clone (its .git) or a bare repository, at this very directory (not a folder inside another repository)."""
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


def own_remote(project: Project) -> Path:
    """<AITEAM_GIT_LOCAL_ROOT>/<organization id>/<project id>.git: the only local remote the rule allows it."""
    if settings.AITEAM_GIT_LOCAL_ROOT is None:
        raise CommandError("local repositories are off (AITEAM_GIT_LOCAL_ROOT is empty): give --repo a URL, or set "
                           "AITEAM_GIT_LOCAL_ROOT")
    return Path(settings.AITEAM_GIT_LOCAL_ROOT) / f"{project.organization_id}/{project.pk}.git"


def import_local(source: Path, target: Path, *, base: str, say: Callable[[str], object] = lambda line: None) -> Path:
    """The source's base branch, with its history, in the bare repository at target (made when missing). Run again,
    it moves the base branch to the source's; the branches aiteam delivered there are left as they are.

    The source is read only through `git upload-pack` (`ls-remote`, then `fetch` into target), never by running git
    inside it: upload-pack is the one git command made to serve repositories it does not trust (it runs no hook, and
    ignores a repository's own settings that would run commands). When git refuses the source, its own words are
    shown (credentials in URLs scrubbed) with what to do: an empty repository has no branch to start from; a branch
    that is not there is named with the ones that are.

    A checkout owned by another user: git refuses it ("detected dubious ownership"), because a repository's
    configuration can make the git that reads it run commands as the reader. git's advice, `git config --global
    --add safe.directory PATH`, would not help: GIT_ENV sets no HOME, so no global configuration is read here, and
    changing the operator's configuration for every later git is not ours to do. The operator named this path on
    the command line, so this one import allows it, for that repository's git directory only: upload-pack runs as
    `git -c safe.directory=<git dir> upload-pack`, with lazy fetches off (GIT_NO_LAZY_FETCH: a partial clone's
    promisor remote is not fetched from) and no hook or fsmonitor, and the command prints that it did so. Nothing
    of the source is read after the import: every later step works on the project's own copy.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    listing = _ls_remote(source, target.parent)
    upload_pack: list[str] = []
    if listing.returncode != 0 and "dubious ownership" in listing.stderr:
        upload_pack = [f"--upload-pack={_trusting_upload_pack(source)}"]
        say(f"--repo {source} belongs to another user (uid {_owner(source)}; you are uid {os.geteuid()}): git refuses "
            "it as is; reading it for this import only, through git upload-pack, because you named it "
            "(its hooks and settings run nothing)")
        listing = _ls_remote(source, target.parent, *upload_pack)
    if listing.returncode != 0:
        raise CommandError(f"--repo {source}: git cannot read it: {_git_said(listing.stderr)}")
    heads = [line.partition("\trefs/heads/")[2] for line in listing.stdout.splitlines() if "\trefs/heads/" in line]
    if not heads:
        raise CommandError(f"--repo {source} has no branch: it is empty (no commit yet); commit on a branch there, "
                           "then pass that branch with --base")
    if base not in heads:
        shown = ", ".join(sorted(heads)[:10]) + (", …" if len(heads) > 10 else "")
        raise CommandError(f"--repo {source} has no branch {base!r} (its branches: {shown}): pass the branch to start "
                           "from with --base")
    target.mkdir(parents=True, exist_ok=True)
    _git(target, "init", "-q", "--bare")
    _git(target, "fetch", "-q", "--no-tags", *upload_pack, str(source), f"+refs/heads/{base}:refs/heads/{base}")
    _git(target, "symbolic-ref", "HEAD", f"refs/heads/{base}")
    return target


def _ls_remote(source: Path, cwd: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "ls-remote", "--heads", *options, str(source)], cwd=cwd, env=GIT_ENV,
                          capture_output=True, text=True, errors="replace", stdin=subprocess.DEVNULL, check=False)


def _git_dir(source: Path) -> Path:
    """The repository's git directory, as upload-pack checks its owner: `.git` of a checkout (or the directory a
    `.git` file names), the directory itself for a bare repository."""
    dot_git = source / ".git"
    if dot_git.is_file():
        named = dot_git.read_text(encoding="utf-8", errors="replace").partition("gitdir:")[2].strip()
        return (source / named).resolve() if named else dot_git
    return dot_git.resolve() if dot_git.is_dir() else source.resolve()


def _trusting_upload_pack(source: Path) -> str:
    """upload-pack allowed to serve this one repository although another user owns it (see import_local). A shell
    command: git runs `--upload-pack` through sh, with the repository's path appended."""
    return (f"GIT_NO_LAZY_FETCH=1 git -c safe.directory={shlex.quote(str(_git_dir(source)))} "
            "-c core.fsmonitor=false -c core.hooksPath=/dev/null upload-pack")


def _owner(source: Path) -> int | str:
    try:
        return _git_dir(source).stat().st_uid
    except OSError:
        return "?"


def _git_said(stderr: str) -> str:
    """git's message on one line, credentials in URLs scrubbed."""
    return scrub(" ".join(line.strip() for line in stderr.splitlines() if line.strip()))[-500:] or "(no message)"


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, errors="replace",
                          stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0:
        raise CommandError(f"git {args[0]} in {cwd} failed: {_git_said(done.stderr)}")
    return done.stdout


def _check_branch(base: str) -> None:
    try:
        validate_branch_name(base)
    except ValidationError as exc:
        raise CommandError(f"--base {base!r}: {'; '.join(exc.messages)}") from None


def _cassette_settings(cassette: Path | None) -> dict[str, Any]:
    if cassette is None:
        return {}
    if not cassette.is_file():
        raise CommandError(f"no cassette file {cassette}: give --cassette a replay cassette (docs/cassettes.md)")
    return {"AITEAM_LLM_PROVIDER": "replay", "AITEAM_REPLAY_CASSETTE": cassette.resolve()}


def _slug(repo: str) -> str:
    name = re.split(r"[/:]", repo.rstrip("/"))[-1].removesuffix(".git")
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:100] or "repository"


def _host(url: str) -> str:
    return re.sub(r"^[a-z+]+://|^[^@/]*@", "", url.lower()).split("/")[0].split(":")[0].split("@")[-1]


def _host_kind(url: str) -> str:
    host = _host(url)
    return HostKind.GITHUB if host == "github.com" else HostKind.GITLAB if host.startswith("gitlab.") else HostKind.GIT


def _scope_line(diff: str) -> str:
    scope = measure(diff)
    reasons = scope.reasons()
    return (f"{scope.lines_changed} lines in {len(scope.files)} files, modules {', '.join(scope.modules) or '-'}"
            f"{' — over the default limits: ' + '; '.join(reasons) if reasons else ''}")


def _failed_step(req: Requirement):
    return req.steps.filter(state=StepState.FAILED).order_by("id").first()
