"""A new project's requirement gets its branch as one on an existing repository does (requirement_branch: by its id,
named when first needed, then kept), and migration 0038 keeps the name the formula before it gave (ADR 42)."""
import importlib
import subprocess

import pytest
from django.apps import apps
from django.conf import settings

from agents.delivery.git_remote import local_commit
from agents.repo.refs import branch_name
from agents.schemas import SourceFile
from agents.workspace import Workspace
from lifecycle.models import Requirement
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.development import workspace_for
from tests.factories import ProjectFactory
from tests.flows import decide, fresh, pending, submit

pytestmark = pytest.mark.django_db(transaction=True)
kept = importlib.import_module("lifecycle.migrations.0038_greenfield_branch")
TITLE = "count_words: don't crash on an empty input, nor on one made only of spaces"


@pytest.fixture
def remotes(settings, tmp_path):
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    return settings.AITEAM_REMOTES_ROOT


def test_a_new_projects_branch_is_named_once_by_id_and_delivered_after_its_title_changed(alice, rita, remotes):
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    req = fresh(req)
    assert req.state == "ready_to_deploy" and req.branch == f"aiteam/{str(req.pk)[:8]}-reading-list"
    Requirement.objects.filter(pk=req.pk).update(title="Books I mean to read")  # as the admin's form may, mid-run
    assert workspace_for(fresh(req)).branch == req.branch

    decide(pending(req, "deployment_approval"), rita, "approve")
    result = content_json(latest(fresh(req), "delivery"))
    assert fresh(req).state == "deployed" and (result["succeeded"], result["branch"]) == (True, req.branch)
    heads = subprocess.run(["git", "ls-remote", "--heads", result["remote_url"]], capture_output=True, text=True).stdout
    assert heads.split() == [workspace_for(req).head(), f"refs/heads/{req.branch}"]


def test_migration_0038_keeps_the_branch_a_running_new_projects_requirement_made_its_workspace_on(acme_project):
    running = Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b",
                                         title=TITLE, state="in_development")
    old = f"aiteam/{str(running.pk)[:8]}-count_words-dont-crash-on-an-empty-input"
    assert branch_name(str(running.pk)[:8], TITLE) != old  # the name it would get now
    workspace = Workspace(settings.AITEAM_WORKSPACE_ROOT / str(running.pk), old).ensure()
    workspace.write([SourceFile(path="words.py", content="def count_words(text):\n    return len(text.split())\n")])
    commit = workspace.commit("T1: count words (attempt 1)")
    repository = ProjectFactory(organization=acme_project.organization, slug="shop", repo_url="https://github.com/acme/shop.git")
    waiting = Requirement.objects.create(organization=repository.organization, project=repository, brief="b",
                                         title=TITLE, ticket_source="github", ticket_key="#12", ticket_via_webhook=True)

    kept.keep_greenfield_branches(apps, None)

    assert fresh(running).branch == old and fresh(waiting).branch == ""  # the repository's is named by key later
    assert local_commit(workspace.path, workspace_for(fresh(running)).branch) == commit
