"""Runs on an existing repository (docs/adr/0035), through the real runner (eager Celery) with real venvs built
offline and real sandbox runs: repo_prepare records the base commit and the baseline (a flaky test marked), a
repository that cannot be prepared is a failed step for a person with the reason, the self-tests and QC's run are
judged per test against the baseline, and a bug's reproduction must fail at the base commit."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.db import transaction

from agents.environments import run as environment_runs
from agents.environments.wheels import write_wheel
from agents.schemas import SourceFile
from lifecycle import repository_runs, runner, step_keys
from lifecycle.actors import Actor
from lifecycle.models import FailureRoute, OutboxEvent, Project, Requirement, RequirementDoc, Step
from lifecycle.replay.runs import replay_start
from lifecycle.services.artifacts import artifact_store, content_json, latest
from lifecycle.services.development import store_code, workspace_commit
from lifecycle.services.outcomes import requirement_cancel
from lifecycle.services.preparation import base_record
from lifecycle.services.scheduling import step_schedule
from tests.flows import SAMPLE, fresh, pending, submit
from tests.repo_history import git
from tests.repo_runs import ADD, CALC, COIN, FILES, KNOWN, MEAN, offline, push_repository

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("sandbox_uid")]
PO_VAGUE = {"verdict": "too_vague", "reasoning": "The brief names no behaviour to change.",
            "clarifying_questions": ["Which function is wrong, and what should it return?"]}
FIXED = CALC.replace("//", "/")
REPRODUCES = "from calc import mean\n\n\ndef test_mean_keeps_fractions():\n    assert mean([1, 2]) == 1.5\n"
PASSES_AT_BASE = "from calc import mean\n\n\ndef test_mean_of_even_values():\n    assert mean([2, 4]) == 3\n"
QC_FILE = "tests/acceptance/test_mean_bug.py"
TICKET_PLAN = {"reasoning": "one function", "interfaces": [{"name": "mean", "signature": "calc.mean(values) -> float"}],
               "tech_stack": ["Python"], "tasks": [{"key": "T1", "title": "Keep fractions", "story_refs": [1],
                                                    "files": ["calc.py"], "depends_on": [], "definition_of_done": "x"}]}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wheels")
    write_wheel(folder, "tinydep", "1.0", {"tinydep/__init__.py": b"ONE = 1\n"})
    return folder


@pytest.fixture
def repository(settings, tmp_path, tmp_path_factory, wheels, acme_project):
    """Offline environments in the session's shared cache, and a helper that pushes the project's repository."""
    offline(settings, tmp_path_factory.getbasetemp() / "repo-envs", wheels)
    return lambda files=FILES: push_repository(settings, acme_project, tmp_path / "remotes", files)


@pytest.fixture
def coin_turned(monkeypatch):
    """The outside world changes between the two base runs: after each run the coin lands heads, so the coin test
    fails in the first run and passes in the second (as test_repo_baseline turns it over)."""
    real = environment_runs.run_repository

    def run_then_turn(checkout, *args, **kwargs):
        done = real(checkout, *args, **kwargs)
        (checkout / "tests" / "coin.txt").write_text("heads")
        return done

    monkeypatch.setattr(environment_runs, "run_repository", run_then_turn)


def prepared(alice, scripted, repository, files=FILES) -> Requirement:
    origin = repository(files)
    scripted.enqueue(PO_VAGUE)  # clarification runs next, and stops at its question
    requirement = fresh(submit(alice, brief=SAMPLE))
    requirement.origin = origin
    return requirement


def failed_preparation(requirement: Requirement):
    step = Step.objects.get(requirement=requirement, key=step_keys.REPO_PREPARE)
    return step, FailureRoute.objects.get(step=step), pending(requirement, "step_failed")


def test_preparing_records_the_base_commit_and_a_baseline_that_marks_the_flaky_test(alice, scripted, repository,
                                                                                      coin_turned):
    requirement = prepared(alice, scripted, repository)

    main = git(requirement.origin, "rev-parse", "refs/heads/main").strip()
    assert requirement.base_sha == main and requirement.state == "blocked"
    assert list(requirement.steps.values_list("key", flat=True)) == ["repo_prepare", "po_clarify"]
    baseline = latest(requirement, "baseline", "baseline")
    stored = content_json(baseline)
    assert stored["ok"] and stored["base_sha"] == main and stored["test_command"]["shown"] == "pytest"
    assert stored["flaky"] == [COIN] and stored["baseline"]["passing"] == [ADD, MEAN]
    assert [run[COIN] for run in stored["runs"]] == ["failed", "passed"]
    assert stored["runs"][0][KNOWN] == stored["runs"][1][KNOWN] == "failed"
    assert stored["counts"] == {"passed": 2, "failed": 2, "errors": 0, "skipped": 0}
    assert stored["environment"]["key"] and stored["environment"]["dependency_files"] == []
    assert baseline.metadata["flaky"] == 1 and "1 flaky" in baseline.summary
    event = OutboxEvent.objects.get(requirement=requirement, name="RepositoryPrepared").payload
    assert event == {"base_sha": main, "branch": stored["branch"], "tests": stored["counts"]}
    assert stored["branch"].startswith("aiteam/")


def test_a_rerun_branches_from_the_recorded_commit_though_main_moved(alice, scripted, repository, settings):
    requirement = prepared(alice, scripted, repository)
    work = settings.AITEAM_GIT_LOCAL_ROOT / f"dev-{requirement.project_id}"
    git(work, "commit", "-q", "--allow-empty", "-m", "Later work on main")
    git(work, "push", "-q", str(requirement.origin), "main")

    again = runner._repo_prepare(SimpleNamespace(requirement_id=requirement.pk))

    assert again["ok"] and again["base_sha"] == requirement.base_sha != git(work, "rev-parse", "HEAD").strip()
    assert base_record(requirement_id=requirement.pk, sha="0" * 40) == requirement.base_sha  # the first one stays


def test_a_repository_that_is_not_python_is_a_failed_step_for_a_person(alice, scripted, repository):
    requirement = prepared(alice, scripted, repository, {"package.json": "{}\n", "index.js": "module.exports = 1\n"})

    step, route, task = failed_preparation(requirement)
    assert (step.state, step.runs, requirement.base_sha != "") == ("failed", 1, True)
    assert (route.route, route.rule) == ("human", "repository_unusable")
    assert "Python repositories only" in task.reasoning and "package.json (JavaScript)" in task.reasoning
    assert task.question.startswith("Step 'repo_prepare' (attempt 1): the repository cannot be prepared as it stands")
    assert not content_json(latest(requirement, "baseline"))["ok"]
    assert not requirement.steps.filter(key=step_keys.PO_CLARIFY).exists() and scripted.queue  # clarification waits


def test_a_failed_install_reaches_a_person_with_the_logs_tail_and_is_not_retried(alice, scripted, repository):
    files = {**FILES, "requirements.txt": "tinydep==1.0\nnot-in-the-wheelhouse==2.0\n"}
    requirement = prepared(alice, scripted, repository, files)

    step, route, task = failed_preparation(requirement)
    assert step.runs == 1 and route.route == "human"
    assert "installing the requirements failed" in task.reasoning
    assert "The log's last lines" in task.reasoning and "not-in-the-wheelhouse==2.0" in task.reasoning
    assert "No matching distribution" in content_json(latest(requirement, "baseline"))["log_tail"]


def test_a_base_run_in_which_pytest_never_ran_the_tests_is_refused_for_a_person(alice, scripted, repository):
    # the audit's cachetools: pytest refused its command (exit 4), no test ran, and the step used to end `done`
    Project.objects.filter(pk=alice.memberships.get().organization.projects.get().pk).update(
        settings={"test_command": "pytest --no-such-plugin-option tests"})

    step, route, task = failed_preparation(prepared(alice, scripted, repository))

    assert (step.runs, route.route, route.rule) == (1, "human", "repository_unusable")
    assert ("the base commit's test run (1 of 2) did not run the repository's tests, so no change can be judged "
            "against them: pytest refused its command line or configuration (exit 4, a usage error)") in task.reasoning
    assert "The log's last lines" in task.reasoning and "unrecognized arguments" in task.reasoning
    stored = content_json(latest(requirement := fresh(step.requirement), "baseline"))
    assert not stored["ok"] and "--no-such-plugin-option" in stored["log_tail"]
    assert not requirement.steps.filter(key=step_keys.PO_CLARIFY).exists()


def test_a_base_run_past_the_time_limit_goes_to_a_person_at_once_with_what_to_raise(alice, scripted, repository,
                                                                                     settings):
    # pyparsing's and packaging's suites outlast 120 s: retried as a hiccup, each attempt cost two timeouts
    settings.AITEAM_SANDBOX_TIMEOUT_S = 3
    files = {**FILES, "tests/test_slow.py": "import time\n\n\ndef test_slow():\n    time.sleep(60)\n"}

    step, route, task = failed_preparation(prepared(alice, scripted, repository, files))

    assert (step.runs, route.route, route.rule) == (1, "human", "repository_unusable")
    assert "stopped at the sandbox's time limit" in task.reasoning
    assert "(AITEAM_SANDBOX_TIMEOUT_S, now 3 s)" in task.reasoning and "AITEAM_STEP_SOFT_LIMIT_S" in task.reasoning


def test_an_empty_repository_is_refused_with_what_to_do(alice, scripted, repository):
    requirement = prepared(alice, scripted, repository, None)

    step, route, task = failed_preparation(requirement)
    assert route.rule == "repository_unusable" and requirement.base_sha == ""
    assert "no branch 'main' yet (it is empty)" in task.reasoning and "remove the project's repo_url" in task.reasoning


# --- after a change: the self-tests and QC's run, per test against the baseline ---------------------------------

def changed(requirement: Requirement, state: str, files: dict[str, str], *, playbook: str = "") -> Requirement:
    """The requirement moved on to `state` with `files` committed on its branch (the engineer's steps are not
    this module's subject)."""
    Requirement.objects.filter(pk=requirement.pk).update(state=state, playbook=playbook or requirement.playbook)
    with transaction.atomic():
        locked = Requirement.objects.select_for_update().get(pk=requirement.pk)
        workspace_commit(locked, [SourceFile(path=p, content=text) for p, text in files.items()], "the change")
    return fresh(requirement)


def run(requirement: Requirement, key: str) -> None:
    with transaction.atomic():
        step_schedule(requirement_id=requirement.pk, key=key, attempt=1)


def test_a_change_that_breaks_a_passing_test_fails_its_self_test_naming_it(alice, scripted, repository):
    requirement = changed(prepared(alice, scripted, repository), "in_development",
                          {"calc.py": CALC.replace("a + b", "a - b")})

    run(requirement, step_keys.SELF_TEST)

    report = content_json(latest(requirement, "test_report", "self_test"))
    assert not report["ok"] and report["failing_tests"] == [ADD]
    assert report["comparison"]["broken"] == [ADD] and KNOWN in report["comparison"]["already_failing"]
    route = FailureRoute.objects.get(requirement=requirement, source="self_test")
    assert route.route == "engineer" and route.facts["failing_tests"] == [ADD]


def test_tests_that_already_failed_at_base_do_not_fail_the_self_test(alice, scripted, repository):
    new_test = "from calc import add\n\n\ndef test_add_negatives():\n    assert add(-1, -2) == -3\n"
    requirement = changed(prepared(alice, scripted, repository), "in_development",
                          {"calc.py": CALC + "\n\ndef double(x):\n    return 2 * x\n", "tests/test_more.py": new_test})

    run(requirement, step_keys.SELF_TEST)

    report = content_json(latest(requirement, "test_report", "self_test"))
    assert report["ok"] and report["failed"] >= 1 and report["failing_tests"] == []
    assert report["comparison"]["added"] == ["tests/test_more.py::test_add_negatives"]
    assert fresh(requirement).state == "in_review"


def test_a_change_after_which_pytest_cannot_start_fails_its_self_test_saying_why(alice, scripted, repository):
    requirement = changed(prepared(alice, scripted, repository), "in_development",
                          {"conftest.py": "raise RuntimeError('a broken conftest')\n"})

    run(requirement, step_keys.SELF_TEST)

    report = content_json(latest(requirement, "test_report", "self_test"))
    assert not report["ok"] and report["exit_code"] == 4
    assert report["comparison"]["not_run"].startswith("the tests did not run: pytest refused its command line")
    assert "a broken conftest" in report["output_tail"]


def qc_wrote(requirement: Requirement, text: str, test: str) -> None:
    """The clarified bug ticket's criterion, and QC's reproduction of it on the branch, stored as qc_tests stores
    them."""
    RequirementDoc.objects.create(requirement=requirement, version=1, summary="mean floors", objectives=["fix it"],
                                  acceptance_criteria=["mean keeps the fraction"])
    step = Step.objects.create(requirement=requirement, key=step_keys.QC_TESTS, attempt=1, state="done")
    with transaction.atomic():
        locked = Requirement.objects.select_for_update().get(pk=requirement.pk)
        commit = workspace_commit(locked, [SourceFile(path=QC_FILE, content=text)], "QC: acceptance tests")
        store_code(locked, [SourceFile(path=QC_FILE, content=text)], step, 1, commit)
        artifact_store(locked, kind="acceptance_coverage", name="acceptance", content={"AC-1": [test]}, step=step)


def not_reproducing_then(alice, scripted, repository, text: str, test: str) -> Requirement:
    """A fixed bug whose reproduction by QC passes at the base commit; QC's next answer writes `text` (test)."""
    requirement = changed(prepared(alice, scripted, repository), "test_pending", {"calc.py": FIXED},
                          playbook="bug_fix")
    qc_wrote(requirement, PASSES_AT_BASE, "test_mean_of_even_values")
    artifact_store(requirement, kind="implementation_plan", name="plan", content=TICKET_PLAN)
    scripted.enqueue({"reasoning": "mean of a pair", "files": [{"path": QC_FILE, "content": text}],
                      "coverage": {"AC-1": [test]}})
    return requirement


def test_a_reproduction_that_passes_at_the_base_commit_goes_back_to_qc_with_the_test(alice, scripted, repository):
    requirement = not_reproducing_then(alice, scripted, repository, REPRODUCES, "test_mean_keeps_fractions")

    run(requirement, step_keys.QC_RUN)  # the gate, QC again with the finding, the gate again

    first, second = (content_json(a)["gate"] for a in requirement.artifacts.filter(kind="test_report", name="qc")
                     .order_by("metadata__round"))
    assert (f"the reproduction test {QC_FILE}::test_mean_of_even_values passes at the base commit: it does not "
            "reproduce the bug") in first["reasons"] and second["passed"]
    (event,) = requirement.events.filter(name="ReproductionsPassAtBase")
    assert event.payload == {"tests": [f"{QC_FILE}::test_mean_of_even_values"]}
    (request,) = [r for r in scripted.requests if r.role == "qc_engineer"]
    assert f"{QC_FILE}::test_mean_of_even_values passed at the base commit" in request.messages[0]["content"]
    assert not FailureRoute.objects.filter(requirement=requirement).exists()  # never the engineer's attempt
    assert fresh(requirement).state == "ready_to_deploy" and fresh(requirement).dev_attempts == requirement.dev_attempts


def test_a_reproduction_still_passing_at_base_after_qcs_rewrite_goes_to_a_person(alice, scripted, repository):
    requirement = not_reproducing_then(alice, scripted, repository, PASSES_AT_BASE, "test_mean_of_even_values")

    run(requirement, step_keys.QC_RUN)

    route = FailureRoute.objects.get(requirement=requirement, source="quality_gate")
    assert (route.route, route.rule) == ("human", "reproduction_passes_at_base")
    assert route.facts["not_reproducing"] == [f"{QC_FILE}::test_mean_of_even_values"]
    assert route.matched[:2] == ["reproduction_passes_at_base", "failing_tests"]  # the engineer's rule loses on order
    assert fresh(requirement).state == "escalated"


def test_a_reproduction_that_fails_at_base_and_passes_after_opens_the_deployment_approval(alice, scripted, repository):
    files = {**FILES, "legacy.py": "import os\n"}  # the repository's own lint finding: not this change's to fix
    requirement = changed(prepared(alice, scripted, repository, files), "test_pending", {"calc.py": FIXED},
                          playbook="bug_fix")
    qc_wrote(requirement, REPRODUCES, "test_mean_keeps_fractions")

    run(requirement, step_keys.QC_RUN)

    stored = content_json(latest(requirement, "test_report", "qc"))
    assert stored["gate"]["passed"], stored["gate"]
    (check,) = stored["comparison"]["reproductions"]
    assert (check["test"], check["at_base"], check["after"]) == (f"{QC_FILE}::test_mean_keeps_fractions", "failed",
                                                                 "passed")
    assert stored["lint"] == [] and fresh(requirement).state == "ready_to_deploy"
    assert pending(requirement, "deployment_approval").context["ci_config"] == ""
    assert not requirement.steps.filter(key=step_keys.DEVOPS).exists()


def test_a_link_out_of_the_tree_does_not_stop_the_reproduction_at_the_base_commit(alice, scripted, repository, settings):
    # export_commit used to raise LinkOutsideDestinationError on it, and qc_run on a bug_fix ticket crashed
    origin = repository()
    work = settings.AITEAM_GIT_LOCAL_ROOT / f"dev-{alice.memberships.get().organization.projects.get().pk}"
    (work / "docs").mkdir()
    (work / "docs" / "system-docs").symlink_to("/usr/share/doc")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "Link the system's docs")
    git(work, "push", "-q", str(origin), "main")
    scripted.enqueue(PO_VAGUE)
    requirement = changed(fresh(submit(alice, brief=SAMPLE)), "test_pending", {"calc.py": FIXED}, playbook="bug_fix")
    qc_wrote(requirement, REPRODUCES, "test_mean_keeps_fractions")

    run(requirement, step_keys.QC_RUN)

    stored = content_json(latest(requirement, "test_report", "qc"))
    assert stored["gate"]["passed"], stored["gate"]
    assert stored["comparison"]["left_out_at_base"] == ["docs/system-docs"]
    assert fresh(requirement).state == "ready_to_deploy"


def test_the_projects_test_command_setting_is_used_and_a_bad_one_refused(alice, scripted, repository):
    Project.objects.filter(pk=alice.memberships.get().organization.projects.get().pk).update(
        settings={"test_command": "pytest -x tests"})

    step, route, task = failed_preparation(prepared(alice, scripted, repository))

    assert route.rule == "repository_unusable"
    assert "project setting: pytest option -x stops at the first failure" in task.reasoning


def test_a_repository_that_cannot_be_fetched_is_a_failed_step_with_gits_reason(alice, scripted, repository, settings,
                                                                                acme_project, tmp_path):
    settings.AITEAM_GIT_LOCAL_ROOT = tmp_path / "remotes"  # allowed by the rule, but nothing is there
    missing = tmp_path / "remotes" / str(acme_project.organization_id) / f"{acme_project.pk}.git"
    Project.objects.filter(pk=acme_project.pk).update(repo_url=str(missing))
    scripted.enqueue(PO_VAGUE)

    step, route, task = failed_preparation(fresh(submit(alice, brief=SAMPLE)))

    assert (step.runs, route.rule) == (1, "repository_unusable")
    assert "fetching the repository failed" in task.reasoning and "empty" not in task.reasoning


def test_a_replay_applies_the_recorded_preparation_without_fetching_or_running(alice, scripted, repository,
                                                                                monkeypatch):
    source = prepared(alice, scripted, repository)
    monkeypatch.setattr(environment_runs, "run_repository", lambda *a, **k: pytest.fail("the replay ran the tests"))

    replay = fresh(replay_start(source_id=source.pk))

    assert replay.base_sha == source.base_sha and replay.state == "blocked"
    assert content_json(latest(replay, "baseline")) == content_json(latest(source, "baseline"))


def test_a_preparation_that_ends_after_the_requirement_was_cancelled_is_skipped(alice, scripted, repository,
                                                                                monkeypatch):
    real = repository_runs.prepare

    def cancelled_meanwhile(requirement, **kwargs):
        output = real(requirement, **kwargs)
        with transaction.atomic():
            requirement_cancel(Requirement.objects.select_for_update().get(pk=requirement.pk),
                               actor=Actor.human(alice, "api"), reason="not needed")
        return output

    monkeypatch.setattr(repository_runs, "prepare", cancelled_meanwhile)
    requirement = prepared(alice, scripted, repository)

    assert requirement.state == "cancelled" and requirement.steps.get(key=step_keys.REPO_PREPARE).state == "skipped"
    assert not requirement.steps.filter(key=step_keys.PO_CLARIFY).exists() and latest(requirement, "baseline") is None


def test_the_cpu_limit_of_a_run_follows_a_longer_wall_clock_limit(settings):
    # a repository's suite runs in one pytest process: 60 s of CPU would end it however far the timeout is raised
    settings.AITEAM_SANDBOX_TIMEOUT_S = 600
    assert (runner._limits().timeout_s, runner._limits().cpu_s) == (600, 600)
    settings.AITEAM_SANDBOX_TIMEOUT_S = 20
    assert runner._limits().cpu_s == 60
