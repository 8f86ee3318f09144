"""Design and implementation on PostgreSQL, Redis and real workers: parallel engineer tasks,
real sandbox runs, escalation (the same failure after a fix goes to a human at once), and resuming after
human guidance."""
import json

import pytest
from django.conf import settings

from lifecycle.models import Requirement, Step
from lifecycle.services.development import workspace_for
from tests.flows import decide, pending, submit
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
FIX_MATCH = "Make the failing tests pass"
GUIDANCE = "Store.add must check the ISBN before saving"


def worker_env(**extra) -> dict:
    return {"AITEAM_WORKSPACE_ROOT": str(settings.AITEAM_WORKSPACE_ROOT), **extra}


def state_of(req) -> str:
    return Requirement.objects.get(pk=req.pk).state


def test_independent_tasks_run_at_once_and_the_dependent_one_after_both(start_worker, alice, rita):
    start_worker("pair", concurrency=2, **worker_env(AITEAM_REPLAY_LATENCY_MS="1500"))
    req = submit(alice)
    wait_for(lambda: state_of(req) == "user_stories_created", what="stories", timeout=30)
    decide(pending(req, "stories_approval"), rita, "approve")
    wait_for(lambda: state_of(req) == "ready_to_deploy", what="design, code, tests, review and QC", timeout=120)

    t1, t2, t3 = (Step.objects.get(requirement=req, key=f"engineer:T{i}", attempt=1) for i in (1, 2, 3))
    assert t1.started_at < t2.finished_at and t2.started_at < t1.finished_at  # T1 and T2 overlapped
    assert t3.started_at >= max(t1.finished_at, t2.finished_at)  # T3 waited for both

    log = [subject for _, subject in workspace_for(req).log()]
    assert sorted(log[:2]) == ["T1: Book model and validation (attempt 1)", "T2: JSON store (attempt 1)"]
    assert log[2:4] == ["T3: Command-line interface (attempt 1)", "T2: fix (attempt 2)"]
    reports = req.artifacts.filter(kind="test_report", name="self_test").order_by("version")
    assert [r.metadata["ok"] for r in reports] == [False, True]
    code = req.artifacts.filter(kind__in=["source_file", "test_file"]).exclude(name__startswith="tests/acceptance/")
    assert {a.metadata["attempt"] for a in code} == {1, 2}


def test_the_same_failure_after_a_fix_escalates_and_human_guidance_resumes_on_a_real_worker(start_worker, alice, rita, tmp_path):
    cassette = json.loads(settings.AITEAM_REPLAY_CASSETTE.read_text())
    engineer = [i for i in cassette["interactions"] if i["role"] == "senior_engineer"]
    buggy_store = next(i for i in engineer if i["match"] == ['"key": "T2"'])["tool_input"]["files"][0]
    fix = next(i for i in engineer if i["match"] == [FIX_MATCH])
    guided = {**fix, "match": [FIX_MATCH, GUIDANCE]}
    fix["tool_input"] = {"reasoning": "retry without the check", "files": [buggy_store]}
    cassette["interactions"].append(guided)
    path = tmp_path / "stubborn.json"
    path.write_text(json.dumps(cassette))
    start_worker("stubborn", concurrency=2, **worker_env(AITEAM_REPLAY_CASSETTE=str(path)))

    req = submit(alice)
    wait_for(lambda: state_of(req) == "user_stories_created", what="stories", timeout=30)
    decide(pending(req, "stories_approval"), rita, "approve")
    wait_for(lambda: state_of(req) == "escalated", what="the same failure after a fix", timeout=120)
    req = Requirement.objects.get(pk=req.pk)
    assert req.dev_attempts == 2  # the third attempt is not burnt on a loop that does not converge
    assert [r.metadata["ok"] for r in req.artifacts.filter(kind="test_report", name="self_test")] == [False] * 2
    assert [(r.route, r.rule) for r in req.failure_routes.all()] == [("engineer", "failing_tests"),
                                                                       ("human", "repeated_after_fix")]
    task = pending(req, "escalation")
    assert task.context["failing_tests"] == ["tests/test_store.py::test_a_second_book_with_the_same_isbn_is_refused"]

    decide(task, rita, "request_changes", feedback=GUIDANCE)
    wait_for(lambda: state_of(req) == "ready_to_deploy", what="the guided attempt to pass review and QC", timeout=90)
    req = Requirement.objects.get(pk=req.pk)
    assert req.dev_attempts == 3
    assert [s for _, s in workspace_for(req).log()][3:5] == ["T2: fix (attempt 2)", "T2: fix (attempt 3)"]
    events = [t.event for t in req.transitions.filter(subject="requirement").order_by("id")]
    assert events[-7:] == ["start_development", "retry_development", "escalate", "resume_development",
                           "submit_for_review", "pass_code_review", "pass_quality_gate"]
