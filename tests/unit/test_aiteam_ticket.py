"""aiteam_ticket up to the ticket's submission: the repository's project (a local clone copied into the project's
own bare remote, or an allowed URL), running it again, and a user's mistakes ending in one line before anything
is submitted. The run itself is the lifecycle's (repo_prepare and the steps after it), tested with them."""
from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from lifecycle.management.commands.aiteam_ticket import operator, project_for, ticket_key
from lifecycle.models import Project, Requirement
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


def test_a_gitlab_url_names_the_project_its_merge_request_is_opened_on(local_root):
    _, organization = operator()

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
