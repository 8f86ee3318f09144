"""Regressions found in review: colliding review rounds, failures while applying output, engineers
touching QC's tests, and project settings choosing which secret goes where."""
import pytest
from pydantic import ValidationError

from agents.schemas import EngineerOutput
from lifecycle.models import Project, Step
from lifecycle.services.reviews import review_open
from tests.answers import answer
from tests.flows import decide, fresh, pending, submit

pytestmark = pytest.mark.django_db(transaction=True)


def test_escalations_from_stories_and_from_development_never_share_a_round(alice):
    req = submit(alice)
    first = review_open(req, kind="escalation", question="stories?", resume_target="ba_stories")
    second = review_open(req, kind="escalation", question="code?", resume_target="engineer_fix")
    assert (first.round, second.round) == (1, 2)


@pytest.mark.parametrize("path", ["tests/acceptance/test_acceptance.py", ".github/workflows/ci.yml", "conftest.py",
                                  "tests/conftest.py", "sitecustomize.py", "readinglist/usercustomize.py", "pytest.py",
                                  "_pytest/main.py", "coverage/__init__.py", "pluggy.py"])
def test_an_engineer_may_not_write_qc_tests_ci_or_files_python_and_pytest_load_on_their_own(path):
    with pytest.raises(ValidationError, match="belong to QC or DevOps"):
        EngineerOutput(reasoning="x", files=[{"path": path, "content": "x"}])


@pytest.mark.parametrize("path", ["./tests/acceptance/test_acceptance.py", "tests//acceptance/test_acceptance.py",
                                  "tests/./acceptance/test_acceptance.py", "./.github/workflows/ci.yml", "a/"])
def test_a_path_must_be_in_normal_form_so_no_other_spelling_reaches_qcs_files(path):
    with pytest.raises(ValidationError, match="normal form|known extension"):
        EngineerOutput(reasoning="x", files=[{"path": path, "content": "x"}])


def test_a_failure_while_applying_output_fails_the_step_and_asks_a_human(alice, rita, scripted):
    clash = {"reasoning": "a file and a directory of the same name",
             "files": [{"path": "readinglist/x.py", "content": "x = 1\n"}, {"path": "readinglist/x.py/y.py", "content": ""}]}
    for item in (answer("product_owner"), answer("business_analyst"), answer("tech_architect"), answer("tech_lead", 0),
                 answer("tech_lead", 1), clash):
        scripted.enqueue(item)
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    step = Step.objects.get(requirement=req, key="engineer:T1")
    assert step.state == "failed" and "while applying the output" in step.error
    failed_steps = {t.context["step"] for t in fresh(req).review_tasks.pending().filter(kind="step_failed")}
    assert "engineer:T1" in failed_steps  # (T2 fails too here: the scripted provider has no answer left for it)
    assert fresh(req).state == "in_development"


def test_project_settings_cannot_send_another_secret_to_another_host(alice, rita, settings, tmp_path):
    from lifecycle.services.artifacts import latest

    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    project = Project.objects.get(organization__slug="acme")
    project.settings = {"github": {"repository": "a/b", "token_env": "ANTHROPIC_API_KEY", "api_url": "https://evil.example"}}
    project.save()
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    decide(pending(fresh(req), "deployment_approval"), rita, "approve")
    step = Step.objects.get(requirement=fresh(req), key="deliver")
    assert step.state == "failed" and "AITEAM_GITHUB_TOKEN_ENVS" in step.error
    assert fresh(req).state == "ready_to_deploy" and latest(req, "delivery") is None


def test_a_group_hand_over_notifies_only_members_of_the_tasks_organization(alice, rita, oscar):
    from django.contrib.auth.models import Group

    from lifecycle.models import ReviewTask
    from lifecycle.notifications.recipients import reviewers

    group = Group.objects.create(name="shared-reviewers")
    group.user_set.add(rita, oscar)
    task = pending(submit(alice), "stories_approval")
    ReviewTask.objects.filter(pk=task.pk).update(assignee_group=group)
    assert reviewers(ReviewTask.objects.get(pk=task.pk)) == [rita]


def test_relay_serves_fresh_events_before_ones_that_keep_failing(acme_project, monkeypatch):
    from lifecycle import handlers
    from lifecycle.models import OutboxEvent, Requirement
    from lifecycle.services import outbox

    req = Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b")
    OutboxEvent.objects.bulk_create(OutboxEvent(requirement=req, name="Broken", relay_attempts=5) for _ in range(3))
    fresh_event = OutboxEvent.objects.create(requirement=req, name="Ping")
    monkeypatch.setitem(handlers.HANDLERS, "Broken", [lambda event: 1 / 0])
    assert outbox.relay(limit=1) == 1
    fresh_event.refresh_from_db()
    assert fresh_event.sent_at is not None


def test_staff_with_model_permissions_still_cannot_browse_other_tenants_llm_calls(rita):
    from django.contrib.auth.models import Permission

    from tests.conftest import staff_client

    rita.user_permissions.add(*Permission.objects.filter(codename__in=["view_llmcall", "change_membership"]))
    client = staff_client(rita)
    assert client.get("/admin/lifecycle/llmcall/").status_code == 403
    assert client.get("/admin/lifecycle/membership/add/").status_code == 403
