"""aiteam_ticket up to the ticket's submission: the repository's project (a local clone copied into the project's
own bare remote, or an allowed URL), running it again, and a user's mistakes ending in one line before anything
is submitted. The run itself is the lifecycle's (repo_prepare and the steps after it), tested with them."""
from __future__ import annotations

import os
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from lifecycle.management.commands import aiteam_ticket
from lifecycle.management.commands.aiteam_ticket import (
    Command,
    _git_said,
    operator,
    project_for,
    ticket_key,
    unisolated_warning,
)
from lifecycle.models import Project, Requirement
from lifecycle.services.artifacts import artifact_store
from lifecycle.services.intake import requirement_submit
from lifecycle.services.repositories import tenant_remote
from tests.repo_history import git
from tests.ticket_corpus import SAMPLE
from tests.ticket_corpus.base import write_history

pytestmark = pytest.mark.django_db


@pytest.fixture
def local_root(settings, tmp_path) -> Path:
    settings.AITEAM_GIT_LOCAL_ROOT = settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    return tmp_path / "remotes"


@pytest.fixture
def clone(tmp_path) -> Path:
    write_history(SAMPLE, tmp_path / "textkit")
    return tmp_path / "textkit"


def _head(repository: Path, ref: str = "refs/heads/main") -> str:
    return git(repository, "rev-parse", ref).strip()


def test_a_local_clone_is_copied_into_the_projects_own_remote_with_its_history(local_root, clone):
    _, organization = operator()

    project = project_for(organization, repo=str(clone), base="main")

    own = local_root / f"{organization.pk}/{project.pk}.git"
    assert (project.slug, project.repo_url, project.host_kind) == ("textkit", str(own), "git")
    assert _head(own) == _head(clone) and len(git(own, "log", "--format=%s", "main").splitlines()) == 3
    assert git(own, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert tenant_remote(project, project.repo_url).refusal() is None


def test_running_again_moves_the_base_branch_and_keeps_what_was_delivered(local_root, clone):
    _, organization = operator()
    first = project_for(organization, repo=str(clone), base="main")
    own = Path(first.repo_url)
    git(own, "update-ref", "refs/heads/aiteam/cli-1-fix", _head(own))  # a branch a run delivered there
    (clone / "NEWS.md").write_text("0.3.1: faster slugs\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "News")

    again = project_for(organization, repo=str(clone), base="main")

    assert again.pk == first.pk and Project.objects.count() == 1
    assert _head(own) == _head(clone) and git(own, "branch", "--list", "aiteam/*").strip() == "aiteam/cli-1-fix"


def test_an_allowed_url_becomes_the_repo_url_with_its_host_kind(local_root):
    _, organization = operator()

    project = project_for(organization, repo="https://github.com/acme/textkit.git", base="develop")

    assert (project.slug, project.repo_url, project.host_kind, project.base_branch) == (
        "textkit", "https://github.com/acme/textkit.git", "github", "develop")
    assert project.settings["github"] == {"repository": "acme/textkit", "api_url": "https://api.github.com"}


def test_a_gitlab_url_names_the_project_its_merge_request_is_opened_on(local_root, settings):
    _, organization = operator()
    with pytest.raises(CommandError, match="the operator has bound no ssh key to this project's organization"):
        project_for(organization, repo="git@gitlab.com:acme/tools/textkit.git", base="main", token_env="GITLAB_TOKEN")
    settings.AITEAM_SSH_IDENTITIES = {organization.slug: Path("/etc/aiteam/ssh/local")}

    project = project_for(organization, repo="git@gitlab.com:acme/tools/textkit.git", base="main",
                          token_env="GITLAB_TOKEN")

    assert project.host_kind == "gitlab" and project.token_env == "GITLAB_TOKEN"
    assert project.settings["gitlab"] == {"project": "acme/tools/textkit", "url": "https://gitlab.com"}


def test_an_api_url_off_the_operators_list_saves_nothing(local_root, settings):
    settings.AITEAM_GIT_HOSTS = ["git.acme.example"]
    _, organization = operator()

    with pytest.raises(CommandError, match="'https://git.acme.example/api/v3' is not one of the operator's AITEAM_GITHUB"):
        project_for(organization, repo="https://git.acme.example/acme/textkit.git", base="main", host="github")

    assert not Project.objects.exists()


def test_a_url_the_operators_rule_refuses_saves_nothing(local_root):
    _, organization = operator()

    with pytest.raises(CommandError, match="not an allowed git host"):
        project_for(organization, repo="https://git.example.net/acme/textkit.git", base="main")

    assert not Project.objects.exists()


def test_the_same_ticket_gets_the_same_key():
    assert ticket_key("slugify", "body\n") == ticket_key(" slugify ", "body") != ticket_key("slugify", "other")


@pytest.mark.parametrize(("change", "message"), [
    ({"body": ""}, "is empty: write what is wrong or wanted"),
    ({"body": None}, "no body file"),
    ({"base": "-x"}, "--base '-x'"),
    ({"repo": "not-a-repository"}, "not a git repository"),
    ({"base": "release"}, "has no branch 'release'"),
    ({"cassette": "missing.json"}, "no cassette file"),
    ({"key": "two words\n"}, "key: a cli ticket key is"),
])
def test_a_users_mistake_ends_in_one_line_before_anything_is_submitted(change, message, local_root, clone, tmp_path):
    body = tmp_path / "ticket.md"
    if change.get("body") is not None:
        body.write_text(change["body"])
    elif "body" not in change:
        body.write_text(SAMPLE.body)
    options = {"repo": str(clone), "base": "main", "title": SAMPLE.title, "body_file": body}
    options.update({k: (str(tmp_path / v) if k in ("repo", "cassette") else v) for k, v in change.items()
                    if k != "body"})

    with pytest.raises(CommandError) as caught:
        call_command("aiteam_ticket", stdout=StringIO(), **options)

    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert not Requirement.objects.exists()


@pytest.mark.django_db(transaction=True)  # the first step is queued on commit
def test_a_ticket_the_cassette_did_not_record_ends_at_triage_in_one_line(local_root, clone, tmp_path):
    body = tmp_path / "ticket.md"
    body.write_text("truncate cuts words in half when the width falls inside one")
    cassette = Path(__file__).resolve().parents[2] / "agents/cassettes/sample_ticket/cassette.json"

    with pytest.raises(CommandError) as caught:
        call_command("aiteam_ticket", stdout=StringIO(), repo=str(clone), title="truncate cuts words", body_file=body,
                     cassette=cassette)

    message = str(caught.value)
    assert message.startswith("step po_triage: replay: the cassette") and "\n" not in message
    assert "no answer recorded for this product_owner request" in message
    requirement = Requirement.objects.get()
    assert (requirement.ticket_source, requirement.project.slug) == ("cli", "textkit")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a checkout to another user needs root")
def test_another_users_checkout_is_read_through_upload_pack_for_this_import_only_and_said_so(
        local_root, clone, tmp_path):
    # git refused it ("detected dubious ownership"), and the user was told the branch did not exist
    marker = tmp_path / "ran"
    git(clone, "config", "core.fsmonitor", f"touch {marker}")  # what another user's configuration could run
    git(clone, "config", "uploadpack.packObjectsHook", f"touch {marker}")
    head = _head(clone)
    for path in [clone, *clone.rglob("*")]:
        os.lchown(path, 4321, 4321)
    _, organization = operator()
    said = []

    project = project_for(organization, repo=str(clone), base="main", say=said.append)

    assert _head(Path(project.repo_url)) == head and not marker.exists()
    (line,) = said
    assert line.startswith(f"--repo {clone} belongs to another user (uid 4321; you are uid 0)")
    assert "for this import only" in line


def test_an_empty_repository_is_said_to_be_empty_not_to_lack_the_branch(local_root, tmp_path):
    empty = tmp_path / "empty"
    git(tmp_path, "init", "-q", str(empty))
    _, organization = operator()

    with pytest.raises(CommandError) as caught:
        project_for(organization, repo=str(empty), base="main")

    assert "has no branch: it is empty (no commit yet)" in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_branch_is_named_with_the_ones_the_repository_has(local_root, clone):
    git(clone, "branch", "develop")
    _, organization = operator()

    with pytest.raises(CommandError, match=r"has no branch 'release' \(its branches: develop, main\): pass the branch"):
        project_for(organization, repo=str(clone), base="release")


def test_a_repository_git_cannot_read_ends_in_gits_own_words_on_one_line(local_root, tmp_path):
    broken = tmp_path / "broken"
    (broken / ".git").mkdir(parents=True)  # a .git with nothing in it
    _, organization = operator()

    with pytest.raises(CommandError) as caught:
        project_for(organization, repo=str(broken), base="main")

    message = str(caught.value)
    assert message.startswith(f"--repo {broken}: git cannot read it: fatal: ") and "\n" not in message
    assert _git_said("fatal: unable to access 'https://bob:s3cret@git.example/x.git/'\n") == (
        "fatal: unable to access 'https://git.example/x.git/'")


@pytest.mark.parametrize(("uid", "allowed", "eager", "expected"), [
    (1000, True, True, "sandbox: NOT isolated: you are not root (uid 1000), so the repository's tests, its "
                       "conftest.py included, run as you, with the network"),
    (1000, False, True, "sandbox: unavailable: you are not root (uid 1000) and AITEAM_SANDBOX_ALLOW_UNISOLATED is "
                        "off, so the repository's tests will be refused"),
    (0, True, True, ""),  # root: the recorded isolation is printed after the run
    (1000, True, False, ""),  # workers run the tests, not this process
])
def test_before_the_run_a_user_who_is_not_root_is_told_the_tests_are_not_isolated(
        uid, allowed, eager, expected, settings, monkeypatch):
    monkeypatch.setattr(aiteam_ticket.os, "geteuid", lambda: uid)
    settings.AITEAM_SANDBOX_ALLOW_UNISOLATED, settings.CELERY_TASK_ALWAYS_EAGER = allowed, eager
    assert unisolated_warning().startswith(expected) and bool(unisolated_warning()) == bool(expected)


def test_the_report_prints_how_the_repositorys_tests_were_isolated(alice):
    req = requirement_submit(user=alice, brief="slugify leaves double dashes", title="Slugs")
    out = StringIO()
    Command(stdout=out)._report_tests(req)
    assert "sandbox:" not in out.getvalue()  # no run yet
    artifact_store(req, kind="baseline", name="baseline", summary="3 passed",
                   content={"ok": True, "reports": [{"isolation": "no bwrap (bubblewrap missing…): network NOT "
                                                                  "isolated"}] * 2})
    Command(stdout=out)._report_tests(req)
    assert "sandbox: no bwrap (bubblewrap missing…): network NOT isolated" in out.getvalue()
    artifact_store(req, kind="test_report", name="qc", summary="4 passed", content={"isolation": "bwrap netns"})
    out = StringIO()
    Command(stdout=out)._report_tests(req)
    assert out.getvalue().rstrip().endswith("sandbox: bwrap netns")
