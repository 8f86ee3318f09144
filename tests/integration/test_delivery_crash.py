"""A worker killed in the middle of a push, on Redis + PostgreSQL: the reaper re-runs the delivery,
which is idempotent — the branch lands on the remote once and the pull request is opened once."""
import subprocess

import pytest
from django.conf import settings

from lifecycle.models import Project, Requirement, Step
from tests.fakes.github_server import FakeGitHubServer
from tests.flows import decide, pending, submit
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "ghp_test_token_never_logged"


def slow_remote(path, marker):
    """A bare repository whose first push stalls in pre-receive, long enough to kill the pusher."""
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    hook = path / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\nif [ ! -e {marker} ]; then touch {marker}; sleep 30; fi\nexit 0\n")
    hook.chmod(0o755)


def state_of(req) -> str:
    return Requirement.objects.get(pk=req.pk).state


def test_redelivery_after_a_kill_mid_push_pushes_once_and_opens_one_pull_request(start_worker, alice, rita, tmp_path):
    project = Project.objects.get(organization__slug="acme", slug="default")
    remotes, marker = tmp_path / "remotes", tmp_path / "push-started"
    bare = remotes / str(project.organization_id) / f"{project.pk}.git"  # the project's own local remote
    slow_remote(bare, marker)
    with FakeGitHubServer(TOKEN) as github:
        project.settings = {"github": {"repository": "acme/readinglist", "api_url": github.url}}
        project.host_kind, project.token_env = "github", "GITHUB_TOKEN"
        project.save()
        env = {"AITEAM_WORKSPACE_ROOT": str(settings.AITEAM_WORKSPACE_ROOT), "AITEAM_REMOTES_ROOT": str(remotes),
               "GITHUB_TOKEN": TOKEN, "AITEAM_GITHUB_API_URLS": github.url}
        doomed = start_worker("pusher", **env)
        req = submit(alice)
        wait_for(lambda: state_of(req) == "user_stories_created", what="stories", timeout=30)
        decide(pending(req, "stories_approval"), rita, "approve")
        wait_for(lambda: state_of(req) == "ready_to_deploy", what="the deployment gate", timeout=120)
        decide(pending(req, "deployment_approval"), rita, "approve")
        wait_for(marker.exists, what="the push to reach the remote's hook", timeout=30)
        doomed.kill_group()
        assert github.creations == 0

        start_worker("rescuer", beat=True, **env)
        wait_for(lambda: state_of(req) == "deployed", what="the reaper to re-run the delivery", timeout=60)
        heads = subprocess.run(["git", "ls-remote", "--heads", str(bare)], capture_output=True, text=True).stdout
        assert len(heads.splitlines()) == 1
        assert github.creations == 1 and len(github.open_pulls()) == 1
        step = Step.objects.get(requirement=req, key="deliver")
        assert (step.state, step.runs) == ("done", 2)
        body = github.open_pulls()[0]["body"]
        assert "## Stories" in body and "Refuse duplicate ISBNs" in body and "QC:" in body
        assert TOKEN not in str(list(req.artifacts.values_list("metadata", flat=True)))
