"""QC's independent gate, DevOps' CI workflow, the deployment gate, and delivery with compensation."""
import json
import subprocess
from datetime import timedelta

import pytest

from agents.ci_config import check_workflow, sandbox_command
from agents.sandbox import run_tests
from lifecycle.models import Project, Requirement, Step
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.development import workspace_for
from lifecycle.services.repositories import default_remote_path
from tests.flows import decide, fresh, pending, submit, transitions

pytestmark = pytest.mark.django_db(transaction=True)
CLI_EMPTY = "print(\"No books.\")"


@pytest.fixture
def cassette(settings, tmp_path):
    """Write a variant of the sample cassette and replay it."""

    def make(change) -> None:
        data = json.loads(settings.AITEAM_REPLAY_CASSETTE.read_text())
        change(data["interactions"])
        path = tmp_path / "variant.json"
        path.write_text(json.dumps(data))
        settings.AITEAM_REPLAY_CASSETTE = path

    return make


@pytest.fixture
def remotes(settings, tmp_path):
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    return settings.AITEAM_REMOTES_ROOT


def to_deployment_gate(alice, rita) -> Requirement:
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    return fresh(req)


def events(req):
    return [t[1] for t in transitions(req)]


def test_the_gate_passes_and_the_deployment_task_shows_score_tests_ci_and_diff(alice, rita, remotes):
    req = to_deployment_gate(alice, rita)
    assert req.state == "ready_to_deploy"
    task = pending(req, "deployment_approval")
    assert task.context["quality_score"] == 100.0 and task.context["tests"]["failed"] == 0
    assert task.context["tests"]["passed"] == 25  # 14 engineer tests + 11 acceptance tests
    assert "python -m pytest -q" in task.context["ci_config"]
    assert any(line.startswith("A readinglist/store.py") for line in task.context["diff_summary"])
    ci = latest(req, "ci_config")
    assert ci.name == ".github/workflows/ci.yml" and ci.metadata["ok"] and ci.metadata["test_command"]
    assert {a.name for a in req.artifacts.filter(kind="runbook")} == {"runbook", "rollback"}


def test_approval_delivers_the_branch_and_deploys(alice, rita, remotes):
    req = to_deployment_gate(alice, rita)
    decide(pending(req, "deployment_approval"), rita, "approve")
    req = fresh(req)
    assert req.state == "deployed" and events(req)[-2:] == ["pass_quality_gate", "deploy"]
    result = content_json(latest(req, "delivery"))
    assert result["succeeded"] and result["branch"] == workspace_for(req).branch
    heads = subprocess.run(["git", "ls-remote", "--heads", result["remote_url"]], capture_output=True, text=True).stdout
    assert heads.split() == [workspace_for(req).head(), f"refs/heads/{result['branch']}"]


def test_the_delivered_branch_passes_its_tests_for_whoever_clones_it(alice, rita, remotes, tmp_path):
    req = to_deployment_gate(alice, rita)
    decide(pending(req, "deployment_approval"), rita, "approve")
    result = content_json(latest(fresh(req), "delivery"))
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "-b", result["branch"], result["remote_url"], str(clone)], check=True)
    ci = check_workflow((clone / ".github/workflows/ci.yml").read_text())
    assert ci.ok, ci.problems
    report = run_tests(clone, command=sandbox_command(ci.test_command))  # the CI's own test command, by hand
    assert report.ok and report.passed == 25


def test_rejecting_the_deployment_goes_back_through_test_pending_with_the_reason(alice, rita, remotes):
    req = to_deployment_gate(alice, rita)
    decide(pending(req, "deployment_approval"), rita, "reject", reason="Add a --version flag first")
    req = fresh(req)
    assert "reject_deployment" in events(req)
    i = events(req).index("reject_deployment")
    assert transitions(req)[i:i + 2] == [("ready_to_deploy", "reject_deployment", "test_pending"),
                                         ("test_pending", "fail_quality_gate", "in_development")]
    fix_call = req.llm_calls.filter(role="senior_engineer").last()
    assert "Deployment refused: Add a --version flag first" in json.dumps(fix_call.messages)
    assert req.state == "ready_to_deploy"  # the replayed fix passes again and asks again
    assert req.review_tasks.filter(kind="deployment_approval").count() == 2


def test_a_deployment_nobody_reviewed_waits_for_a_person_instead_of_going_back_to_the_engineer(alice, rita, remotes):
    from lifecycle.models import MetaEvalLog
    from lifecycle.services.sla import review_sweep
    from tests.conftest import api_for

    req = to_deployment_gate(alice, rita)
    task = pending(req, "deployment_approval")
    before = (req.dev_attempts, req.llm_calls.count(), req.steps.count(), MetaEvalLog.objects.count())
    assert review_sweep(now=task.decide_by + timedelta(minutes=1)) == {"escalate": 1}  # not auto_decide
    assert review_sweep(now=task.decide_by + timedelta(hours=1, minutes=2)) == {"remind": 1}  # and it keeps waiting

    task.refresh_from_db()
    assert (task.state, task.decision, task.decided_by_policy) == ("escalated", "", "")
    req = fresh(req)
    assert req.state == "ready_to_deploy" and "reject_deployment" not in events(req)
    assert (req.dev_attempts, req.llm_calls.count(), req.steps.count(), MetaEvalLog.objects.count()) == before
    shown = api_for(alice).get(f"/api/v1/requirements/{req.pk}/").data
    assert [(t["kind"], t["state"]) for t in shown["open_review_tasks"]] == [("deployment_approval", "escalated")]
    limits = [t["metadata"]["limit"] for t in shown["transitions"] if "limit" in t["metadata"]]
    assert [t for t in limits if "the SLA policy never decides a Deployment Approval" in t] == limits
    assert len(limits) == 2  # the escalation and the reminder both say why it still waits

    decide(task, rita, "approve")  # a person can still decide it
    assert fresh(req).state == "deployed"


def test_qc_fails_a_build_that_passes_its_own_tests_but_misses_a_criterion(alice, rita, remotes, cassette):
    def quiet_empty_list(interactions):
        for i in interactions:
            if i["role"] == "senior_engineer" and i["match"] == ['"key": "T3"']:
                for f in i["tool_input"]["files"]:
                    f["content"] = f["content"].replace('"No books."', '"Nothing to read."')

    cassette(quiet_empty_list)
    req = to_deployment_gate(alice, rita)
    qc_reports = req.artifacts.filter(kind="test_report", name="qc").order_by("version")
    first = content_json(qc_reports[0])
    assert not qc_reports[0].metadata["ok"]
    assert first["failing_tests"] == ["tests/acceptance/test_acceptance.py::test_an_empty_list_prints_no_books_and_exits_0"]
    self_tests_before_qc = req.artifacts.filter(kind="test_report", name="self_test", created_at__lt=qc_reports[0].created_at)
    assert self_tests_before_qc.order_by("-created_at").first().metadata["ok"]  # the engineer's own tests passed
    assert ("test_pending", "fail_quality_gate", "in_development") in transitions(req)
    fix_call = req.llm_calls.filter(role="senior_engineer").last()
    assert "test_an_empty_list_prints_no_books_and_exits_0" in json.dumps(fix_call.messages)
    failed = req.events.get(name="TestsFailed")
    assert failed.payload["source"] == "qc" and failed.payload["failures"][0] == first["failing_tests"][0]


def test_a_push_failure_is_compensated_and_leaves_the_requirement_ready_to_deploy(alice, rita, remotes, tmp_path):
    bare = default_remote_path(alice.memberships.get().organization.projects.get())  # the project's own remote
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'remote is read-only' >&2\nexit 1\n")
    hook.chmod(0o755)
    req = to_deployment_gate(alice, rita)
    decide(pending(req, "deployment_approval"), rita, "approve")
    req = fresh(req)
    assert req.state == "ready_to_deploy"
    result = content_json(latest(req, "delivery"))
    assert not result["succeeded"] and "read-only" in result["error"]
    assert subprocess.run(["git", "ls-remote", "--heads", str(bare)], capture_output=True, text=True).stdout == ""
    failed = pending(req, "step_failed")
    assert "delivery failed" in failed.reasoning
    hook.unlink()  # the operator fixes the remote and retries from the task
    decide(failed, rita, "approve")
    assert fresh(req).state == "deployed"


def test_the_status_digest_follows_the_requirement(alice, rita, remotes):
    req = to_deployment_gate(alice, rita)
    digest = content_json(latest(req, "status_digest"))
    assert digest["state"] == "ready_to_deploy"
    assert digest["blockers"][0]["kind"] == "deployment_approval"
    assert digest["loops"]["engineer_attempts"] == 2
    assert digest["llm_spend"]["senior_engineer"]["calls"] == 4
    from tests.conftest import api_for

    shown = api_for(alice).get(f"/api/v1/requirements/{req.pk}/").data["status_digest"]
    assert shown["state"] == "ready_to_deploy" and shown["headline"].startswith("Ready To Deploy: waiting")


def test_the_admin_shows_the_status_digest(alice, rita, remotes):
    from tests.conftest import staff_client

    req = to_deployment_gate(alice, rita)
    page = staff_client(rita).get(f"/admin/lifecycle/requirement/{req.pk}/change/").content.decode()
    assert "PM status digest" in page and "Ready To Deploy: waiting for a human (deployment_approval)" in page
    assert "engineer_attempts 2" in page


def test_the_daily_beat_refreshes_digests_of_requirements_in_flight(alice, rita, remotes):
    from lifecycle.tasks import refresh_status_digests

    req = to_deployment_gate(alice, rita)
    before = req.artifacts.filter(kind="status_digest").count()
    assert refresh_status_digests() == 1
    assert req.artifacts.filter(kind="status_digest").count() == before + 1


def test_project_settings_cannot_send_another_secret_to_another_host(alice, rita, remotes):
    project = Project.objects.get(organization__slug="acme")
    # saved past the form's validation (before the operator narrowed the list, say): delivery checks again
    project.settings = {"github": {"repository": "a/b", "api_url": "https://evil.example"}}
    project.host_kind, project.token_env = "github", "ANTHROPIC_API_KEY"
    project.save()
    req = to_deployment_gate(alice, rita)
    decide(pending(req, "deployment_approval"), rita, "approve")
    step = Step.objects.get(requirement=fresh(req), key="deliver")
    assert step.state == "failed" and "AITEAM_TOKEN_ENVS" in step.error
    assert fresh(req).state == "ready_to_deploy" and latest(req, "delivery") is None
