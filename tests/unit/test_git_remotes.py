"""A project's git remote is tenant input the worker hands to git outside the sandbox: only https or ssh to an
allowed host, or the project's own repository under the operator's local root. Refused when saved, reported by a
system check when stored from before, and refused at delivery before git starts, as a failure for a person."""
from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from django.core.checks import run_checks
from drf_spectacular.generators import SchemaGenerator

from agents.delivery import DeliveryPlan, Remote, RemoteRefused, deliver, git_remote, remote_refusal
from agents.repo.mirror import MirrorError
from lifecycle.models import FailureRoute, Project, Step
from lifecycle.services.artifacts import content_json, latest
from tests.conftest import staff_client
from tests.factories import MembershipFactory, ProjectFactory, project_form_data
from tests.flows import fresh, pending, submit

BRANCH = "aiteam/req-1"
HOSTS = ("github.com", "gitlab.com")
GOOD = ["https://github.com/acme/shop.git", "https://GitLab.com:443/acme/shop", "ssh://git@github.com/acme/shop.git",
        "git@github.com:acme/shop.git", "github.com:acme/shop.git"]
# The probe's values (another tenant's remote is added per test, it needs ids), and their near relatives.
PROBES = ["file:///srv/git/other.git", "file:///etc", "http://169.254.169.254/", "https://169.254.169.254/latest",
          "--upload-pack=touch /tmp/pwned", "-oProxyCommand=touch /tmp/pwned", "ext::sh -c touch% /tmp/pwned",
          "fd::17", "https://x-access-token:ghp_secret@github.com/acme/shop.git", "https://ghp_secret@github.com/a/b",
          "ssh://git:hunter2@github.com/acme/shop.git", "http://github.com/acme/shop.git", "git://github.com/acme/shop",
          "https://github.com.evil.example/acme/shop.git", "git@evil.example:acme/shop.git", "../other/repo.git",
          "repo.git", "https://github.com/acme/shop.git\n--upload-pack=x", "ssh://-oProxyCommand=x/path",
          "https://github.com/acme/shop.git?ref=x", "https://github.com/acme/shop.git#main", "https://github.com/a/b?",
          "git@github.com:acme/shop.git#main", "HTTPS://github.com/acme/shop.git", "Ssh://git@github.com/acme/shop.git"]
ACME_KEY = Path("/etc/aiteam/ssh/acme_ed25519")


@pytest.fixture
def roots(settings, tmp_path) -> Path:
    settings.AITEAM_REMOTES_ROOT = settings.AITEAM_GIT_LOCAL_ROOT = tmp_path / "remotes"
    settings.AITEAM_GIT_HOSTS = list(HOSTS)
    return settings.AITEAM_REMOTES_ROOT


@pytest.fixture
def boss(acme):
    return MembershipFactory(organization=acme, role="admin", user__username="boss").user


def own_remote(project: Project) -> Path:
    from lifecycle.services.repositories import default_remote_path

    return default_remote_path(project)


def save_repo_url(user, project: Project, url: str):
    form = project_form_data(project, repo_url=url)
    return staff_client(user).post(f"/admin/lifecycle/project/{project.pk}/change/", form)


# --- The rule itself (agents/delivery/remotes.py).

@pytest.mark.parametrize("url", GOOD)
def test_https_and_ssh_to_an_allowed_host_pass(url):
    assert remote_refusal(url, hosts=HOSTS, local_root=None, own_path="", ssh_key=ACME_KEY) is None


@pytest.mark.parametrize("url", [u for u in GOOD if not u.startswith("https://")])
def test_an_ssh_remote_is_refused_unless_the_operator_bound_a_key_to_the_organization(url):
    reason = remote_refusal(url, hosts=HOSTS, local_root=None, own_path="")
    assert reason.startswith("is an ssh remote, and the operator has bound no ssh key to this project's organization")
    assert "AITEAM_SSH_IDENTITIES" in reason and "https:// URL with a token" in reason
    assert "not an absolute path" in remote_refusal(url, hosts=HOSTS, local_root=None, own_path="",
                                                    ssh_key=Path("keys/acme"))


@pytest.mark.parametrize("url", PROBES)
def test_the_probes_values_are_refused_with_a_reason_that_does_not_repeat_a_secret(url, tmp_path):
    reason = remote_refusal(url, hosts=HOSTS, local_root=tmp_path, own_path="org/project.git", ssh_key=ACME_KEY)
    assert reason and "secret" not in reason and "hunter2" not in reason


def test_a_local_path_passes_only_as_the_projects_own_repository_under_the_root(tmp_path):
    def refusal(url, root=tmp_path):
        return remote_refusal(url, hosts=HOSTS, local_root=root, own_path="org/project.git")

    assert refusal(f"{tmp_path}/org/project.git") is None and refusal(f"file://{tmp_path}/org/project.git") is None
    assert "other than this project's own" in refusal(f"{tmp_path}/org/other.git")
    assert "other than this project's own" in refusal(f"{tmp_path}/other-org/project.git")
    assert "other than this project's own" in refusal(f"{tmp_path}/org/x/../../other-org/project.git")
    assert "local remotes are off" in refusal(f"{tmp_path}/org/project.git", root=None)
    assert "file:// URL with a host" in refusal(f"file://localhost{tmp_path}/org/project.git")


# --- Refused when saved: the Project admin (the API cannot set a remote).

@pytest.mark.django_db
def test_each_probe_value_is_a_form_error_and_is_not_stored(roots, acme_project, boss, oscar, globex, settings):
    settings.AITEAM_SSH_IDENTITIES = {"acme": ACME_KEY}  # an ssh probe is refused for what it is, not for want of a key
    theirs = own_remote(Project.objects.get(organization=globex))
    for url in [*PROBES, str(theirs), f"file://{theirs}"]:
        response = save_repo_url(boss, acme_project, url)
        assert response.status_code == 200, url
        (error,) = response.context["adminform"].form.errors["repo_url"]
        assert error.startswith("This remote ") and "secret" not in error, (url, error)
        acme_project.refresh_from_db()
        assert acme_project.repo_url == "", url


@pytest.mark.django_db
def test_an_https_remote_on_an_allowed_host_and_the_projects_own_local_remote_are_saved(roots, acme_project, boss,
                                                                                       settings):
    settings.AITEAM_SSH_IDENTITIES = {"acme": ACME_KEY}
    for url in ["https://github.com/acme/shop.git", "git@gitlab.com:acme/shop.git", str(own_remote(acme_project))]:
        assert save_repo_url(boss, acme_project, url).status_code == 302, url
        acme_project.refresh_from_db()
        assert acme_project.repo_url == url


@pytest.mark.django_db
def test_another_project_of_the_same_organization_is_not_the_projects_own(roots, acme_project, boss):
    other = ProjectFactory(organization=acme_project.organization, slug="other")
    (error,) = save_repo_url(boss, acme_project, str(own_remote(other))).context["adminform"].form.errors["repo_url"]
    assert "other than this project's own repository" in error


@pytest.mark.django_db
def test_a_host_the_operator_narrows_the_list_to_is_the_only_one_accepted(roots, settings, acme_project, boss):
    settings.AITEAM_GIT_HOSTS = ["git.example.com"]
    (error,) = save_repo_url(boss, acme_project, "https://github.com/acme/shop.git").context["adminform"].form.errors[
        "repo_url"]
    assert "AITEAM_GIT_HOSTS: git.example.com" in error
    assert save_repo_url(boss, acme_project, "https://git.example.com/acme/shop.git").status_code == 302


def test_no_api_request_body_takes_a_repo_url():
    """The admin form is the only way a remote is saved; an API that takes one must validate it the same way
    (lifecycle.services.repositories.tenant_remote(project, url).refusal())."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    bodies = [op["requestBody"] for path in schema["paths"].values() for op in path.values()
              if isinstance(op, dict) and "requestBody" in op]
    refs = {content["schema"].get("$ref", "").rpartition("/")[2] for body in bodies for content in body["content"].values()}
    taken = {name: list(components[name].get("properties", {})) for name in refs if name in components}
    assert taken and not any("repo_url" in fields for fields in taken.values()), taken


# --- Stored before the rule: the system check, and delivery.

@pytest.mark.django_db
def test_the_system_check_names_each_project_whose_stored_remote_no_longer_passes(roots, acme_project, globex, oscar):
    bad = ProjectFactory(organization=acme_project.organization, slug="probe")
    Project.objects.filter(pk=bad.pk).update(repo_url="file:///srv/git/other.git")
    Project.objects.filter(organization=globex).update(repo_url="https://github.com/globex/app.git")
    Project.objects.filter(pk=acme_project.pk).update(repo_url=str(own_remote(acme_project)))

    warnings = [w for w in run_checks(databases=["default"]) if w.id == "aiteam.W001"]

    assert [w.obj.pk for w in warnings] == [bad.pk]
    assert "acme/probe" in warnings[0].msg and "is a local path" in warnings[0].msg
    assert not [w for w in run_checks() if w.id == "aiteam.W001"]  # without a database the check does not query


def test_deliver_refuses_a_bad_remote_before_any_git_command_starts(tmp_path, monkeypatch):
    commands: list[tuple] = []
    monkeypatch.setattr(git_remote, "_git", lambda *args, **kwargs: commands.append(args) or "")
    plan = DeliveryPlan(workspace=tmp_path, branch=BRANCH, remote=Remote("--upload-pack=touch /tmp/pwned", hosts=HOSTS))

    result = deliver(plan)

    assert commands == []
    assert not result.succeeded and result.refused and result.to_dict()["refused"]
    assert "is refused: it starts with '-'" in result.error
    with pytest.raises(RemoteRefused):  # and each git call checks again on its own
        git_remote.remote_branches(tmp_path, plan.remote)
    assert commands == []


@pytest.mark.django_db(transaction=True)
def test_a_stored_bad_remote_fails_the_preparation_once_for_a_person_without_running_git(roots, alice, monkeypatch):
    """A project with a repo_url is an existing repository (ADR 35): its first step, repo_prepare, checks the rule
    before the mirror fetches anything, so the refusal comes there, not at delivery."""
    Project.objects.filter(organization__memberships__user=alice).update(repo_url="http://169.254.169.254/")
    commands: list[tuple] = []
    real_git = git_remote._git
    monkeypatch.setattr(git_remote, "_git", lambda *args, **kwargs: commands.append(args) or real_git(*args, **kwargs))

    req = submit(alice)

    assert commands == [] and fresh(req).state == "received" and fresh(req).base_sha == ""
    step = Step.objects.get(requirement=req, key="repo_prepare")
    assert (step.state, step.runs) == ("failed", 1)  # not retried
    assert list(req.steps.values_list("key", flat=True)) == ["repo_prepare"]
    route = FailureRoute.objects.get(requirement=req, step=step)
    assert route.route == "human" and "refused before any git command" in route.summary
    assert not content_json(latest(req, "baseline"))["ok"]
    task = pending(req, "step_failed")
    assert "169.254.169.254" in task.reasoning and "repo_url" in task.reasoning


# --- How git is called.

@pytest.fixture
def workspace(tmp_path) -> Path:
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@localhost", "PATH": "/usr/bin:/bin"}
    path = tmp_path / "workspace"
    path.mkdir()
    for args in (["init", "-q", "-b", BRANCH], ["commit", "-q", "--allow-empty", "-m", "work"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return path


def spy_on_git(monkeypatch, *, run: bool) -> list[tuple[list[str], dict]]:
    seen: list[tuple[list[str], dict]] = []
    real_run = subprocess.run

    def spy(cmd, *args, **kwargs):
        seen.append((cmd, kwargs["env"]))
        if run or "--" not in cmd:
            return real_run(cmd, *args, **kwargs)
        return subprocess.CompletedProcess(cmd, 128, "", "fatal: unable to access (spy)")

    monkeypatch.setattr(git_remote.subprocess, "run", spy)
    return seen


def test_git_gets_the_url_after_double_dash_and_only_https_ssh_and_the_local_root(workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    remote = tmp_path / "remotes" / "org" / "project.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    seen = spy_on_git(monkeypatch, run=True)

    result = deliver(DeliveryPlan(workspace=workspace, branch=BRANCH,
                                  remote=Remote(str(remote), local_root=tmp_path / "remotes", own_path="org/project.git")))

    assert result.succeeded, result.error
    calls = [(cmd, env) for cmd, env in seen if str(remote) in cmd]
    for cmd, env in calls:
        assert cmd[cmd.index("--") + 1] == str(remote)
        assert " ".join(cmd[1:9]) == ("-c protocol.allow=never -c protocol.https.allow=always "
                                     "-c protocol.ssh.allow=always -c protocol.file.allow=always")
        assert "SSH_AUTH_SOCK" not in env
    assert {cmd[9] for cmd, _ in calls} == {"ls-remote", "push"}


def test_an_https_remote_gets_no_file_protocol_and_no_ssh_agent(workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    seen = spy_on_git(monkeypatch, run=False)

    result = deliver(DeliveryPlan(workspace=workspace, branch=BRANCH,
                                  remote=Remote("https://github.com/acme/shop.git", hosts=HOSTS)))

    assert not result.succeeded and not result.refused and "unable to access" in result.error
    (cmd, env), = [(cmd, env) for cmd, env in seen if "--" in cmd]
    assert cmd[:7] == ["git", "-c", "protocol.allow=never", "-c", "protocol.https.allow=always", "-c",
                       "protocol.ssh.allow=always"]
    assert cmd[7:] == ["ls-remote", "--heads", "--", "https://github.com/acme/shop.git"]
    assert "SSH_AUTH_SOCK" not in env and not any("protocol.file" in part for part in cmd)
    assert "-o IdentityAgent=none" in env["GIT_SSH_COMMAND"]
    assert json.dumps(result.to_dict())  # the failed result is still a storable record


# --- ssh: one organization's key, and no other (docs/adr/0043).

def fake_ssh(tmp_path: Path, monkeypatch) -> Path:
    """An `ssh` first on PATH that records its arguments and fails, as a host refusing the key would."""
    bin_dir, log = tmp_path / "bin", tmp_path / "ssh.log"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexit 255\n')
    (bin_dir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return log


@pytest.mark.django_db
def test_an_organization_without_a_bound_key_cannot_save_or_use_an_ssh_remote(roots, settings, tmp_path, monkeypatch,
                                                                               acme_project, globex):
    """The worker's ssh key is not everyone's: globex names acme's repository over ssh, and neither the form nor
    git lets the worker's (or acme's) key reach it for globex."""
    from lifecycle.services.repositories import mirror_for

    settings.AITEAM_SSH_IDENTITIES = {"acme": tmp_path / "acme_ed25519"}
    log = fake_ssh(tmp_path, monkeypatch)
    theirs = ProjectFactory(organization=globex, slug="default")
    globex_admin = MembershipFactory(organization=globex, role="admin", user__username="gboss").user
    url = "git@github.com:acme/private-payroll.git"

    (error,) = save_repo_url(globex_admin, theirs, url).context["adminform"].form.errors["repo_url"]
    assert error.startswith("This remote is an ssh remote, and the operator has bound no ssh key to this project's "
                            "organization: ask the operator to bind one (AITEAM_SSH_IDENTITIES")
    Project.objects.filter(pk=theirs.pk).update(repo_url=url)  # stored before the rule
    mirror = mirror_for(Project.objects.get(pk=theirs.pk))
    with mirror.locked(), pytest.raises(MirrorError, match="is refused: it is an ssh remote, and the operator has bound no"):
        mirror.sync("main")
    assert not log.exists()  # ssh never started

    Project.objects.filter(pk=acme_project.pk).update(repo_url=url)
    mirror = mirror_for(Project.objects.get(pk=acme_project.pk))
    with mirror.locked(), pytest.raises(MirrorError):
        mirror.sync("main")
    (called,) = log.read_text().splitlines()
    assert called.startswith("-F none -o BatchMode=yes -o IdentityAgent=none -o IdentitiesOnly=yes -o IdentityFile="
                             f"{tmp_path}/acme_ed25519 ") and "acme/private-payroll.git" in called


@pytest.mark.parametrize("key", [ACME_KEY, None])
def test_ssh_reads_no_config_agent_or_default_key_only_the_bound_one(key, tmp_path):
    """What ssh itself makes of the command line (`ssh -G`): the bound key is its only identity, or with none it
    offers no key at all; no ssh config file (the user's or the system's) adds one."""
    command = shlex.split(git_remote.ssh_command(key))
    effective = subprocess.run([*command, "-G", "github.com"], capture_output=True, text=True, check=True).stdout
    options = [line.split(" ", 1) for line in effective.splitlines()]
    assert [value for name, value in options if name == "identityfile"] == [str(key) if key else "none"]
    assert {name: value for name, value in options if name in ("identityagent", "identitiesonly", "batchmode")} == {
        "identityagent": "none", "identitiesonly": "yes", "batchmode": "yes"}
    assert ("pubkeyauthentication", "true" if key else "false") in [tuple(o) for o in options]
