"""Design and implementation on the embedded default: spec, review loop, plan, engineer tasks,
real sandbox runs, the 3-attempt rule, escalation with guidance, and the tech lead's code review."""
import pytest

from agents.workspace import Workspace
from lifecycle.models import Requirement
from lifecycle.services.artifacts import content_json
from lifecycle.services.development import workspace_for
from tests.answers import answer
from tests.flows import decide, fresh, pending, submit, transitions

pytestmark = pytest.mark.django_db(transaction=True)
SPEC, DESIGN_OK, PLAN = answer("tech_architect"), answer("tech_lead", 0), answer("tech_lead", 1)
T1, T2_BUGGY, T3, FIX = (answer("senior_engineer", i) for i in range(4))
CODE_OK = answer("tech_lead", 2)
QC, DEVOPS = answer("qc_engineer"), answer("devops_engineer")
T2_OK = {"reasoning": "store with the ISBN check", "files": FIX["files"] + T2_BUGGY["files"][1:]}
REVISE = {"verdict": "revise", "reasoning": "gaps", "notes": ["Say how the file is written atomically"]}
CHANGES = {"verdict": "request_changes", "reasoning": "naming", "notes": ["store.py: name the temp file clearly"]}


def approved_stories(user, reviewer) -> Requirement:
    req = submit(user)
    decide(pending(req, "stories_approval"), reviewer, "approve")
    return fresh(req)


def test_the_sample_runs_through_code_review_with_a_failing_then_passing_attempt(alice, rita):
    req = approved_stories(alice, rita)
    assert req.state == "ready_to_deploy"  # QC and DevOps follow code review (tested in test_quality_and_delivery)
    assert [t[1] for t in transitions(req)] == [
        "submit", "clarify", "create_stories", "approve_design", "start_development", "retry_development",
        "submit_for_review", "pass_code_review", "pass_quality_gate",
    ]
    spec = req.artifacts.get(kind="technical_spec")
    assert spec.approved and req.artifacts.filter(kind="adr").count() == 2
    reports = [content_json(r) for r in req.artifacts.filter(kind="test_report", name="self_test").order_by("version")]
    assert [(r["ok"], r["failing_tests"]) for r in reports] == [
        (False, ["tests/test_store.py::test_a_second_book_with_the_same_isbn_is_refused"]), (True, []),
    ]
    assert reports[1]["passed"] == 14


def test_every_attempt_has_code_artifacts_and_a_commit_naming_task_and_attempt(alice, rita):
    req = approved_stories(alice, rita)
    log = [subject for _, subject in workspace_for(req).log()]
    assert log[:4] == ["T1: Book model and validation (attempt 1)", "T2: JSON store (attempt 1)",
                       "T3: Command-line interface (attempt 1)", "T2: fix (attempt 2)"]
    code = req.artifacts.filter(kind__in=["source_file", "test_file"]).exclude(name__startswith="tests/acceptance/")
    assert code.filter(metadata__attempt=1).count() == 8
    assert list(code.filter(metadata__attempt=2).values_list("name", "version")) == [("readinglist/store.py", 2)]
    commits = {a.metadata["commit"] for a in req.artifacts.filter(kind__in=["source_file", "test_file"])}
    assert commits == {sha for sha, subject in workspace_for(req).log() if not subject.startswith("DevOps")}


def test_the_same_failure_after_a_fix_escalates_at_once_and_guidance_resumes(alice, rita, scripted):
    for item in (answer("product_owner"), answer("business_analyst"), SPEC, DESIGN_OK, PLAN, T1, T2_BUGGY, T3):
        scripted.enqueue(item)
    scripted.enqueue({"reasoning": "retry", "files": T2_BUGGY["files"][:1]})  # the fix changes nothing that matters
    req = approved_stories(alice, rita)
    assert req.state == "escalated" and req.dev_attempts == 2  # the third attempt is not burnt
    task = pending(req, "escalation")
    assert task.context["failing_tests"] == ["tests/test_store.py::test_a_second_book_with_the_same_isbn_is_refused"]
    assert task.context["routing_rule"] == "repeated_after_fix" and "the same way after a fix" in task.question
    assert [(r.route, r.rule) for r in req.failure_routes.all()] == [("engineer", "failing_tests"),
                                                                       ("human", "repeated_after_fix")]
    scripted.enqueue(FIX).enqueue(CODE_OK).enqueue(QC).enqueue(DEVOPS)
    decide(task, rita, "request_changes", feedback="Store.add must check the ISBN before saving")
    req = fresh(req)
    assert req.state == "ready_to_deploy" and req.dev_attempts == 3
    assert "Store.add must check the ISBN" in str(scripted.requests[-4].messages)
    assert [t[1] for t in transitions(req)][-6:] == [
        "retry_development", "escalate", "resume_development", "submit_for_review", "pass_code_review",
        "pass_quality_gate",
    ]


def test_three_different_failures_escalate_after_the_third_attempt(alice, rita, scripted):
    for item in (answer("product_owner"), answer("business_analyst"), SPEC, DESIGN_OK, PLAN, T1, T2_BUGGY, T3):
        scripted.enqueue(item)
    broken = {"reasoning": "rewrite", "files": [{"path": "readinglist/store.py", "content": "def broken(:\n"}]}
    scripted.enqueue(broken).enqueue({"reasoning": "retry", "files": T2_BUGGY["files"][:1]})
    req = approved_stories(alice, rita)
    assert req.state == "escalated" and req.dev_attempts == 3
    assert [(r.route, r.rule) for r in req.failure_routes.all()] == [
        ("engineer", "failing_tests"), ("engineer", "failing_tests"), ("human", "loop_exhausted")]
    last = req.failure_routes.last()
    assert last.matched == ["loop_exhausted", "failing_tests"]
    assert last.facts["after_fix"] and last.facts["previous_signature"] != last.signature  # a new failure, not a repeat
    assert pending(req, "escalation").context["routing_rule"] == "loop_exhausted"


def test_cancelling_an_escalation_cancels_the_requirement(alice, rita, scripted):
    for item in (answer("product_owner"), answer("business_analyst"), SPEC, DESIGN_OK, PLAN, T1, T2_BUGGY, T3):
        scripted.enqueue(item)
    still_buggy = {"reasoning": "retry", "files": T2_BUGGY["files"][:1]}
    scripted.enqueue(still_buggy).enqueue(still_buggy)
    req = approved_stories(alice, rita)
    decide(pending(req, "escalation"), rita, "reject", reason="not worth it")
    assert fresh(req).state == "cancelled"


def test_design_revisions_are_bounded_then_a_human_decides(alice, rita, scripted, settings):
    settings.AITEAM_MAX_DESIGN_ROUNDS = 2
    for item in (answer("product_owner"), answer("business_analyst"), SPEC, REVISE, SPEC, REVISE):
        scripted.enqueue(item)
    req = approved_stories(alice, rita)
    assert req.state == "user_stories_created" and req.design_round == 2
    assert "Say how the file is written atomically" in str(scripted.requests[4].messages)  # round 2 saw the notes
    task = pending(req, "design_review")
    for item in (PLAN, T1, T2_OK, T3, CODE_OK, QC, DEVOPS):
        scripted.enqueue(item)
    decide(task, rita, "approve")
    req = fresh(req)
    assert req.state == "ready_to_deploy" and req.artifacts.get(kind="technical_spec", version=2).approved


def test_a_failed_code_review_sends_notes_back_to_the_engineer(alice, rita, scripted):
    for item in (answer("product_owner"), answer("business_analyst"), SPEC, DESIGN_OK, PLAN, T1, T2_OK, T3, CHANGES,
                 FIX, CODE_OK, QC, DEVOPS):
        scripted.enqueue(item)
    req = approved_stories(alice, rita)
    assert req.state == "ready_to_deploy" and req.code_review_round == 2
    assert "store.py: name the temp file clearly" in str(scripted.requests[-4].messages)
    assert [t[1] for t in transitions(req)][-5:] == [
        "submit_for_review", "fail_code_review", "submit_for_review", "pass_code_review", "pass_quality_gate",
    ]


def test_the_workspace_refuses_paths_outside_it(tmp_path):
    from agents.schemas import SourceFile
    from agents.workspace import WorkspaceError

    workspace = Workspace(tmp_path / "ws", "aiteam/x").ensure()
    with pytest.raises(WorkspaceError):
        workspace.write([SourceFile.model_construct(path="../escape.py", content="x")])
    assert not (tmp_path / "escape.py").exists()


def test_each_apply_commits_with_four_git_processes_the_first_making_the_repository(alice, monkeypatch):
    import subprocess

    from django.db import transaction

    from agents.schemas import SourceFile
    from lifecycle.services.development import workspace_commit

    req = submit(alice)  # waiting for the stories' approval: nothing committed yet
    ran, run = [], subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda args, *rest, **kwargs: ran.append(args[1]) or run(args, *rest, **kwargs))
    for message in ("T1 (attempt 1)", "T2 (attempt 1)"):
        with transaction.atomic():
            workspace_commit(fresh(req), [SourceFile(path="app.py", content=f"# {message}\n")], message)
    assert ran == ["init", "add", "commit", "rev-parse", "status", "add", "commit", "rev-parse"]
    assert [subject for _, subject in workspace_for(fresh(req)).log()] == ["T1 (attempt 1)", "T2 (attempt 1)"]
