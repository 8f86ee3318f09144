"""Failures are routed where the classifier says, the action happens, and the route with its trace is on
record (admin and API): infrastructure is retried then goes to an operator, a spec issue goes to the
architect (an acceptance gap's routes are in test_coverage_gaps.py)."""
import json
import subprocess

import pytest

from agents.llm.base import LLMTransientError
from agents.sandbox import TestReport
from agents.workspace import GitError, Workspace
from lifecycle.models import Project
from lifecycle.services.artifacts import content_json
from lifecycle.services.repositories import default_remote_path
from tests.answers import BA_STORIES, PO_CLEAR, answer
from tests.conftest import api_for, staff_client
from tests.flows import decide, fresh, pending, submit, transitions

pytestmark = pytest.mark.django_db(transaction=True)
SPEC, DESIGN_OK, PLAN = answer("tech_architect"), answer("tech_lead", 0), answer("tech_lead", 1)
T1, T2_BUGGY, T3, FIX = (answer("senior_engineer", i) for i in range(4))
T2_OK = {"reasoning": "store with the ISBN check", "files": FIX["files"] + T2_BUGGY["files"][1:]}
CODE_OK, QC, DEVOPS = answer("tech_lead", 2), answer("qc_engineer"), answer("devops_engineer")
TO_REVIEW = (PO_CLEAR, BA_STORIES, SPEC, DESIGN_OK, PLAN, T1, T2_OK, T3)
SPEC_ISSUE = {"verdict": "request_changes", "reasoning": "the spec contradicts itself",
              "spec_issues": ["Store.add is specified both to overwrite and to refuse a duplicate ISBN"]}


def queue(scripted, *answers) -> None:
    for item in answers:
        scripted.enqueue(item)


def routes(req) -> list[tuple[str, str, str]]:
    return [(r.source, r.route, r.rule) for r in req.failure_routes.all()]


def approved(alice, rita):
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    return fresh(req)


def test_an_llm_outage_is_retried_and_the_route_is_recorded(alice, scripted):
    queue(scripted, LLMTransientError("529 overloaded"), PO_CLEAR, BA_STORIES)
    req = submit(alice)
    assert req.state == "user_stories_created"
    route = req.failure_routes.get()
    assert (route.source, route.route, route.rule, route.step.key) == ("step", "retry", "infrastructure_retry",
                                                                       "po_clarify")
    assert route.action.startswith("retry: run 2 of 3") and "529 overloaded" in route.summary


def test_an_llm_outage_that_outlasts_the_step_runs_goes_to_an_operator(alice, rita, scripted):
    queue(scripted, *[LLMTransientError("529 overloaded")] * 3)
    req = submit(alice)
    assert routes(req) == [("step", "retry", "infrastructure_retry")] * 2 + [
        ("step", "operator", "infrastructure_exhausted")]
    assert req.failure_routes.last().matched == ["infrastructure_exhausted"]
    task = pending(req, "step_failed")
    assert "po_clarify" in task.question and "529 overloaded" in task.reasoning
    queue(scripted, PO_CLEAR, BA_STORIES)
    decide(task, rita, "approve")
    assert fresh(req).state == "user_stories_created"


def test_output_that_stays_invalid_goes_to_a_person_as_invalid_model_output(alice, scripted):
    queue(scripted, *[{"nonsense": True}] * 3)
    req = submit(alice)
    assert routes(req) == [("step", "human", "invalid_model_output")]
    assert "invalid model output" in pending(req, "step_failed").question


def test_a_git_failure_while_applying_is_retried_and_the_step_completes(alice, rita, scripted, monkeypatch):
    real_commit, failed = Workspace.commit, []

    def flaky_commit(self, message):
        if message.startswith("QC:") and not failed:
            failed.append(message)
            raise GitError("git commit -q: fatal: Unable to create '.git/index.lock': File exists.")
        return real_commit(self, message)

    monkeypatch.setattr(Workspace, "commit", flaky_commit)
    queue(scripted, *TO_REVIEW, CODE_OK, QC, QC, DEVOPS)  # the retry runs QC's step (and its model call) again
    req = approved(alice, rita)
    assert req.state == "ready_to_deploy" and failed
    assert routes(req) == [("step", "retry", "infrastructure_retry")]
    assert req.failure_routes.get().step.key == "qc_tests"
    assert req.steps.get(key="qc_tests").runs == 2


def test_an_apply_failing_after_its_git_commit_leaves_no_commit_and_no_stray_file(alice, rita, scripted, monkeypatch):
    """QC's apply commits its tests, then fails before the transaction commits, leaving what a killed git would
    leave too (an untracked file, the index lock). The retry puts the workspace back at the commit the database
    recorded first: one QC commit, no stray file, and the recorded head is the branch's."""
    from lifecycle.services import quality
    from lifecycle.services.development import workspace_for

    real_store, failed = quality.store_code, []

    def store_after_a_crash(requirement, files, step, attempt, commit):
        if not failed:
            failed.append(commit)
            path = workspace_for(requirement).path
            (path / "half_written.py").write_text("x = ")
            (path / ".git" / "index.lock").write_text("")
            raise GitError("git: the worker was interrupted")  # infrastructure: retried
        return real_store(requirement, files, step, attempt, commit)

    monkeypatch.setattr(quality, "store_code", store_after_a_crash)
    queue(scripted, *TO_REVIEW, CODE_OK, QC, QC, DEVOPS)
    req = approved(alice, rita)
    assert req.state == "ready_to_deploy" and failed
    workspace = workspace_for(req)
    subjects = [subject for _, subject in workspace.log()]
    assert sum(subject.startswith("QC:") for subject in subjects) == 1 and subjects[-1] == "DevOps: CI workflow"
    assert not (workspace.path / "half_written.py").exists() and not (workspace.path / ".git" / "index.lock").exists()
    assert req.workspace_head == workspace.head()


def test_the_first_commit_of_a_requirement_rolled_back_is_not_kept(alice, rita, scripted, monkeypatch):
    """T1's apply is the first to commit; it fails before its transaction commits. Nothing was recorded, so the
    retry starts from an empty repository: one T1 commit, and the workspace's history is what the database
    recorded."""
    from lifecycle.services import development

    real_store, failed = development.store_code, []

    def store_after_a_crash(requirement, files, step, attempt, commit):
        if not failed and step.key.endswith(":T1"):
            failed.append(commit)
            raise GitError("git: the worker was interrupted")
        return real_store(requirement, files, step, attempt, commit)

    monkeypatch.setattr(development, "store_code", store_after_a_crash)
    queue(scripted, *TO_REVIEW[:5], T1, T1, *TO_REVIEW[6:], CODE_OK, QC, DEVOPS)
    req = approved(alice, rita)
    assert req.state == "ready_to_deploy" and failed
    workspace = development.workspace_for(req)
    subjects = [subject for _, subject in workspace.log()]
    assert sum(subject.startswith("T1:") for subject in subjects) == 1 and subjects[0].startswith("T1:")
    assert req.workspace_head == workspace.head()


def test_a_sandbox_timeout_is_retried_then_an_operator_decides(alice, rita, scripted, monkeypatch):
    stuck = TestReport(passed=3, exit_code=-9, timed_out=True, killed_reason="timeout", duration_s=120.0,
                       output_tail="tests/test_store.py ...")
    monkeypatch.setattr("agents.sandbox.run_tests", lambda path, **kw: stuck)
    queue(scripted, *TO_REVIEW)
    req = approved(alice, rita)
    assert req.state == "in_development"  # a stopped run is not a failing test: no attempt is burnt
    assert routes(req) == [("step", "retry", "infrastructure_retry")] * 2 + [
        ("step", "operator", "infrastructure_exhausted")]
    assert req.failure_routes.last().facts["error_classes"][0] == "SandboxTimedOut"
    task = pending(req, "step_failed")
    assert "self_test" in task.question and "SandboxTimedOut" in task.reasoning
    monkeypatch.undo()  # the operator fixed the sandbox host
    queue(scripted, CODE_OK, QC, DEVOPS)
    decide(task, rita, "approve")
    assert fresh(req).state == "ready_to_deploy"


def test_a_spec_inconsistency_found_in_review_goes_to_the_architect_before_the_fix(alice, rita, scripted):
    revised = {**SPEC, "summary": "Revised: a duplicate ISBN is refused, never overwritten. " + SPEC["summary"]}
    queue(scripted, *TO_REVIEW, SPEC_ISSUE, revised, FIX, CODE_OK, QC, DEVOPS)
    req = approved(alice, rita)
    assert req.state == "ready_to_deploy"
    assert routes(req) == [("code_review", "architect", "spec_inconsistency")]
    assert [t[1] for t in transitions(req)][-5:] == [
        "submit_for_review", "fail_code_review", "submit_for_review", "pass_code_review", "pass_quality_gate"]
    specs = req.artifacts.filter(kind="technical_spec").order_by("version")
    assert [(s.version, s.metadata["round"]) for s in specs] == [(1, 1), (2, 2)] and req.design_round == 2
    architect, fixer = (json.dumps(scripted.requests[i].messages) for i in (9, 10))
    assert "Store.add is specified both to overwrite and to refuse" in architect
    assert "Spec issue found in review" in fixer
    reviewer = json.dumps(scripted.requests[8].messages)
    assert SPEC["summary"][:40] in reviewer  # the reviewer saw the spec it found inconsistent


def test_a_refused_push_is_retried_then_an_operator_decides(alice, rita, settings, tmp_path):
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    bare = default_remote_path(Project.objects.get(organization__memberships__user=alice))  # the project's own remote
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'remote is read-only' >&2\nexit 1\n")
    hook.chmod(0o755)
    req = approved(alice, rita)
    decide(pending(req, "deployment_approval"), rita, "approve")
    req = fresh(req)
    assert req.state == "ready_to_deploy"
    assert routes(req)[0] == ("self_test", "engineer", "failing_tests")  # the sample's first attempt fails its tests
    assert routes(req)[1:] == [("step", "retry", "infrastructure_retry")] * 2 + [
        ("step", "operator", "infrastructure_exhausted")]
    deliveries = req.artifacts.filter(kind="delivery")
    assert deliveries.count() == 3 and not any(content_json(d)["succeeded"] for d in deliveries)
    assert "delivery failed" in pending(req, "step_failed").reasoning


@pytest.fixture
def routed(alice, scripted):
    queue(scripted, *[LLMTransientError("529 overloaded")] * 3)
    return submit(alice)


def test_the_api_lists_a_requirements_routes_with_their_trace(alice, routed):
    shown = api_for(alice).get(f"/api/v1/requirements/{routed.pk}/routing/")
    assert shown.status_code == 200
    assert [(r["route"], r["rule"]) for r in shown.data] == [("retry", "infrastructure_retry")] * 2 + [
        ("operator", "infrastructure_exhausted")]
    first = shown.data[0]
    assert first["step"]["key"] == "po_clarify" and first["matched"] == ["infrastructure_retry",
                                                                        "infrastructure_exhausted"]
    assert [t["rule"] for t in first["trace"]][:2] == ["infrastructure_retry", "infrastructure_exhausted"]
    only = api_for(alice).get(f"/api/v1/requirements/{routed.pk}/routing/?route=operator")
    assert [r["rule"] for r in only.data] == ["infrastructure_exhausted"]


def test_the_api_refuses_unknown_filters_and_hides_other_organizations_routes(alice, oscar, routed):
    bad = api_for(alice).get(f"/api/v1/requirements/{routed.pk}/routing/?route=nowhere")
    assert bad.status_code == 400 and "route" in bad.data
    unknown = api_for(alice).get(f"/api/v1/requirements/{routed.pk}/routing/?colour=red")
    assert unknown.status_code == 400 and unknown.data == {"colour": ["unknown field"]}
    as_json = api_for(alice).get(f"/api/v1/requirements/{routed.pk}/routing/?format=json&route=operator")
    assert as_json.status_code == 200 and [r["rule"] for r in as_json.json()] == ["infrastructure_exhausted"]
    assert api_for(oscar).get(f"/api/v1/requirements/{routed.pk}/routing/").status_code == 404
    assert api_for(alice).get("/api/v1/requirements/00000000-0000-0000-0000-000000000000/routing/").status_code == 404
    assert api_for(alice).get("/api/v1/requirements/not-a-uuid/routing/").status_code == 404


def test_the_admin_shows_the_routing_trace_on_the_requirement_and_in_its_own_list(rita, oscar, routed):
    page = staff_client(rita).get(f"/admin/lifecycle/requirement/{routed.pk}/change/").content.decode()
    assert "failure routing (classifier trace)" in page.lower() and "infrastructure_exhausted" in page
    assert "✔ infrastructure_retry → retry" in page and "· repeated_after_fix → human" in page
    listing = staff_client(rita).get("/admin/lifecycle/failureroute/")
    assert listing.status_code == 200 and "infrastructure_exhausted" in listing.content.decode()
    other = staff_client(oscar).get("/admin/lifecycle/failureroute/").content.decode()
    assert "infrastructure_exhausted" not in other
