"""Evaluation suites (docs/evals.md): the offline suite's format, and a small suite end to end through
`aiteam_eval` on the replay provider, the whole team on the embedded default: a good case scores full; a case whose
delivered code fails its hidden tests is a gate false pass (QC passed it, the hidden tests did not)."""
from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from io import StringIO
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from agents.sandbox import run_tests
from agents.sandbox.report import TestReport
from lifecycle.evals import hidden, report, running
from lifecycle.evals.measures import critical_path_s, gate_verdicts
from lifecycle.evals.running import eval_case_run, eval_run_start
from lifecycle.evals.suites import Case, Repository, SuiteError, load_case, load_suite, suite_id
from lifecycle.models import (
    Artifact,
    EvalCase,
    EvalRun,
    ImplementationTask,
    MetaEvalLog,
    Requirement,
    ReviewTask,
    Step,
)
from lifecycle.services.artifacts import artifact_store
from tests.ticket_corpus import ENTRIES, SAMPLE

OFFLINE = Path(settings.BASE_DIR) / "evals/offline"
SAMPLE_TICKET = Path(settings.BASE_DIR) / "agents/cassettes/sample_ticket"
UNMET = '''from textkit.slug import slugify


def test_a_run_of_spaces_is_one_dash():
    assert slugify("a   b") == "a-b"


def test_accented_letters_are_kept_as_plain_letters():
    assert slugify("Creme brulee") == "creme-brulee" and slugify("Crème brûlée") == "creme-brulee"
'''


def _ticket_case(folder: Path, hidden: Path) -> Path:
    """The sample ticket as a case, its paths absolute, with these hidden tests."""
    folder.mkdir(parents=True)
    (folder / "case.toml").write_text(
        f'kind = "ticket"\ntitle = "{SAMPLE.title}"\nbody = "{SAMPLE_TICKET}/body.md"\n'
        f'cassette = "{SAMPLE_TICKET}/cassette.json"\nhidden = "{hidden}"\n\n'
        f'[repository]\nbuilder = "{OFFLINE}/make_repo.py"\nargs = ["{SAMPLE.key}"]\n')
    return folder


@pytest.fixture
def small_suite(tmp_path) -> Path:
    unmet = tmp_path / "unmet/tests"
    unmet.mkdir(parents=True)
    (unmet / "test_hidden_accents.py").write_text(UNMET)
    _ticket_case(tmp_path / "suite/1-good", OFFLINE / SAMPLE.key / "hidden")
    _ticket_case(tmp_path / "suite/2-false-pass", tmp_path / "unmet")
    return tmp_path / "suite"


@pytest.fixture
def offline(settings, tmp_path, tmp_path_factory):
    """Remotes under a local root, environments from local wheels only (a shared cache), no package index."""
    settings.AITEAM_GIT_LOCAL_ROOT = settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    settings.AITEAM_ENVIRONMENTS_ROOT = tmp_path_factory.getbasetemp() / "ticket-run-envs"
    settings.AITEAM_PIP_INDEX_URL, settings.AITEAM_PIP_FIND_LINKS = "", []


def test_the_offline_suite_holds_the_sample_brief_the_sample_ticket_and_the_corpus():
    cases = {case.name: case for case in load_suite("offline")}

    assert set(cases) == {"sample-brief", *ENTRIES} and len(cases) >= 6
    assert all(case.cassette.is_file() and case.hidden_ids for case in cases.values())
    assert cases[SAMPLE.key].cassette == (SAMPLE_TICKET / "cassette.json").resolve()
    assert cases["sample-brief"].body.startswith("We want a small service") and cases["sample-brief"].repository is None
    for key, entry in ENTRIES.items():
        assert cases[key].hidden == entry.hidden and cases[key].repository.args == (key,)
        assert not [path for path in entry.hidden if path in cases[key].cassette.read_text()]  # never shown


def test_the_corpus_cases_are_what_make_cases_writes():
    spec = importlib.util.spec_from_file_location("make_cases", OFFLINE / "make_cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for entry in ENTRIES.values():
        for path, text in module.files(entry).items():
            assert (OFFLINE / entry.key / path).read_text(encoding="utf-8") == text, f"re-run make_cases.py: {path}"


def test_a_case_without_its_repository_or_with_an_unknown_kind_is_one_line(tmp_path):
    (tmp_path / "case.toml").write_text('kind = "ticket"\ntitle = "x"\nbody = "case.toml"\ncassette = "c.json"\n')
    with pytest.raises(SuiteError, match="a ticket case names its \\[repository\\] builder"):
        load_case(tmp_path)
    (tmp_path / "case.toml").write_text('kind = "story"\ntitle = "x"\nbody = "case.toml"\ncassette = "c.json"\n')
    with pytest.raises(SuiteError, match="kind must be one of brief, ticket"):
        load_case(tmp_path)
    with pytest.raises(CommandError, match="no suite nowhere"):
        call_command("aiteam_eval", "run", "--suite", "nowhere", stdout=StringIO())


@pytest.mark.django_db(transaction=True)
@pytest.mark.xdist_group("sandbox_uid")  # the cases' tests run in the sandbox
def test_a_small_suite_runs_end_to_end_scoring_full_and_a_gate_false_pass(small_suite, offline):
    out = StringIO()
    call_command("aiteam_eval", "run", "--suite", str(small_suite), stdout=out)

    run = EvalRun.objects.get()
    good, false_pass = EvalCase.objects.filter(run=run).order_by("name")
    text = out.getvalue()
    assert "[1/2] 1-good (ticket): running" in text and "[2/2] 2-false-pass: deployed, hidden partial (1/2)" in text
    assert (good.outcome, good.hidden, good.hidden_passed, good.hidden_total) == ("deployed", "full", 4, 4), text
    assert good.quality_gate_passed is True and good.gate_false_pass is False
    assert (false_pass.outcome, false_pass.hidden, false_pass.quality_gate_passed) == ("deployed", "partial", True)
    assert false_pass.gate_false_pass is True and "FALSE PASS" in text.split("\n2-false-pass")[-1].splitlines()[0]
    assert {"gate": "deployment_approval", "verdict": "approve", "by": "eval"} in good.gates
    assert {"gate": "quality", "verdict": "pass"} in good.gates and {"gate": "code_review", "verdict": "approve"} in good.gates
    assert good.attempts["senior_engineer"]["steps"] >= 1 and good.attempts["qc_engineer"]["steps"] == 1
    assert good.llm_calls == 7 and good.input_tokens > 0 and good.cost_usd > 0 and good.loops["qc_rounds"] == 1
    (signal,) = MetaEvalLog.objects.filter(kind="gate_signal")  # the false pass, in the meta-evaluation log too
    assert signal.requirement_id == false_pass.requirement_id and signal.data == {
        "gate": "quality", "verdict": "pass", "contradicted_by": "hidden_tests", "hidden": "partial", "hidden_passed": 1,
        "hidden_total": 2, "eval_run": run.pk, "case": "2-false-pass"}
    assert 0 < good.critical_path_s <= good.wall_s and run.bundle_id and run.finished_at and not run.live

    exported = StringIO()
    call_command("aiteam_eval", "export", str(run.pk), stdout=exported)
    data = json.loads(exported.getvalue())
    assert data["summary"] == {**data["summary"], "cases": 2, "hidden_full": 1, "gate_false_passes": 1,
                               "outcomes": {"deployed": 2}}
    read = good.cache_read_tokens + false_pass.cache_read_tokens
    everything = sum(c.input_tokens + c.cache_read_tokens + c.cache_creation_tokens for c in (good, false_pass))
    assert (data["summary"]["cache_read_tokens"], data["summary"]["input_tokens_in_all"]) == (read, everything)
    assert f"input tokens read from cache: {read} of {everything} (" in text
    assert [case["name"] for case in data["cases"]] == ["1-good", "2-false-pass"] and data["bundle"] == run.bundle_id


@pytest.mark.django_db
def test_the_critical_path_counts_the_pipeline_and_the_longest_chain_of_plan_tasks(acme_project):
    requirement = Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b")
    for position, (key, after) in enumerate((("T1", []), ("T2", ["T1"]), ("T3", []))):
        ImplementationTask.objects.create(requirement=requirement, key=key, position=position, title=key,
                                          depends_on=after, definition_of_done="done")
    start = timezone.now()
    # seconds per step: the pipeline 5 + 2, T1 3 + 1 (a second attempt), T2 4, T3 6 (in parallel with T1 → T2)
    for key, attempt, seconds in (("tl_plan", 1, 5), ("engineer:T1", 1, 3), ("engineer:T1", 2, 1),
                                  ("engineer:T2", 1, 4), ("engineer:T3", 1, 6), ("qc_run", 1, 2)):
        Step.objects.create(requirement=requirement, key=key, attempt=attempt, state="done", started_at=start,
                            finished_at=start + timedelta(seconds=seconds))
    Step.objects.create(requirement=requirement, key="deliver", state="running", started_at=start)

    assert critical_path_s(requirement) == 5 + 2 + (3 + 1 + 4)


PARAMETRIZED = '''import pytest


@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    assert n > 0


class TestGroup:
    def test_in_class(self):
        assert True


def test_plain():
    assert True
'''
HIDDEN = "tests/test_eval_hidden.py"


def _case(hidden: dict[str, str], cassette: Path = OFFLINE / "make_repo.py") -> Case:
    return Case(name="c", kind="brief", title="t", body="b", cassette=cassette, hidden=hidden)


def _judged(monkeypatch, tmp_path, case: Case, report: TestReport, outcomes: dict[str, str]):
    """judge() over a delivered branch whose hidden tests' run gave this report and these outcomes."""
    monkeypatch.setattr(hidden, "latest", lambda *args: object())
    monkeypatch.setattr(hidden, "content_json", lambda artifact: {"succeeded": True, "remote_url": str(tmp_path),
                                                                  "head_commit": "0" * 40})
    monkeypatch.setattr(hidden, "export_commit", lambda remote, commit, target, files: target)
    monkeypatch.setattr(hidden, "_run", lambda *args: (report, outcomes))
    return hidden.judge(SimpleNamespace(base_sha=""), case)


@pytest.mark.parametrize(("problem", "why"), [({"tampered": ["the canary's outcome was changed"]}, "tampered"),
                                             ({"unjudged": "too large"}, "unjudged"),
                                             ({"timed_out": True, "killed_reason": "timeout"}, "timed out")])
def test_a_hidden_run_whose_report_is_not_believed_passes_none_and_says_why(monkeypatch, tmp_path, settings,
                                                                             problem, why):
    settings.AITEAM_ENVIRONMENTS_ROOT = tmp_path / "envs"
    case = _case({HIDDEN: PARAMETRIZED})
    every = {f"{HIDDEN}::{name}": "passed" for name in ("test_param[1]", "test_param[2]", "TestGroup::test_in_class",
                                                        "test_plain")}
    judged = _judged(monkeypatch, tmp_path, case, TestReport(passed=4, **problem), every)
    assert (judged.result, judged.passed, judged.total) == ("none", 0, 3)
    assert "not believed" in judged.error and why in judged.error


@pytest.mark.django_db(transaction=True)
@pytest.mark.xdist_group("sandbox_uid")  # a real sandbox run
def test_a_conftest_that_forces_every_outcome_to_passed_is_tampering(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_eval_hidden.py").write_text("def test_hidden():\n    assert False\n")
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    report = (yield).get_result()\n    report.outcome, report.longrepr = 'passed', None\n")
    report = run_tests(tmp_path)
    assert hidden.passed_all(f"{HIDDEN}::test_hidden", hidden._outcomes(report))  # what the forged report says
    assert "tampered" in hidden.not_believed(report)


def test_class_methods_and_parametrized_tests_are_expected_and_scored_whole(monkeypatch, tmp_path, settings):
    settings.AITEAM_ENVIRONMENTS_ROOT = tmp_path / "envs"
    case = _case({HIDDEN: PARAMETRIZED})
    assert case.hidden_ids == [f"{HIDDEN}::test_param", f"{HIDDEN}::TestGroup::test_in_class", f"{HIDDEN}::test_plain"]
    ran = {f"{HIDDEN}::test_param[1]": "passed", f"{HIDDEN}::test_param[2]": "passed",
           f"{HIDDEN}::TestGroup::test_in_class": "passed", f"{HIDDEN}::test_plain": "passed"}
    judged = _judged(monkeypatch, tmp_path, case, TestReport(passed=4), ran)
    assert (judged.result, judged.passed, judged.total, judged.error) == ("full", 3, 3, "")
    judged = _judged(monkeypatch, tmp_path, case, TestReport(passed=3, failed=1),
                     {**ran, f"{HIDDEN}::test_param[2]": "failed"})
    assert (judged.result, judged.passed, judged.total) == ("partial", 2, 3)  # one parameter failed: the test did


def _case_toml(folder: Path, text: str, **files: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "body.md").write_text("a brief")
    for name, data in {"case.toml": text.encode(), **files}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


BRIEF = 'kind = "brief"\ntitle = "t"\nbody = "body.md"\ncassette = "c.json"\n'
TICKET = 'kind = "ticket"\ntitle = "t"\nbody = "body.md"\ncassette = "c.json"\n'


@pytest.mark.parametrize(("text", "files", "message"), [
    ('kind = "brief"\ntitle = "t"\nbody = 5\ncassette = "c.json"\n', {}, "case.toml: body must be a string, not 5"),
    (BRIEF + "hidden = 5\n", {}, "case.toml: hidden must be a string, not 5"),
    ('kind = ["brief"]\ntitle = "t"\nbody = "body.md"\ncassette = "c.json"\n', {}, "kind must be a string"),
    ('kind = "brief"\ntitle = 5\nbody = "body.md"\ncassette = "c.json"\n', {}, "title must be a string, not 5"),
    (TICKET + 'repository = "x"\n', {}, "case.toml: repository must be a table, not 'x'"),
    (TICKET + '[repository]\nbuilder = "b.py"\nargs = "abc"\n', {},
     r"case.toml \[repository\]: args must be a list of strings, not 'abc'"),
    ('kind = "brief"\ntitle = "t"\ncassette = "c.json"\n', {}, "case.toml: body is required"),
    ('kind = "brief"\ntitle = "\xe9"\n', {"case.toml": b'title = "\xff"\n'}, "case.toml: UnicodeDecodeError"),
    (BRIEF + 'hidden = "h"\n', {"h/tests/test_x.py": b"# \xff\n"}, "test_x.py: UnicodeDecodeError"),
    (BRIEF + 'hidden = "h"\n', {"h/tests/test_x.py": b"def test_x(:\n    pass\n"},
     r"h/tests/test_x.py:1: the hidden module does not parse"),
])
def test_a_malformed_case_is_one_line_naming_the_file_and_the_field(tmp_path, text, files, message):
    folder = _case_toml(tmp_path / "case", text, **files)
    with pytest.raises(SuiteError, match=message):
        load_case(folder)


def test_a_suite_is_named_by_its_folder_under_evals_or_its_resolved_path(tmp_path, monkeypatch):
    monkeypatch.chdir(settings.BASE_DIR)
    assert {suite_id(name) for name in ("offline", "evals/offline", "./evals/offline/", str(OFFLINE))} == {"offline"}
    (tmp_path / "mine").mkdir()
    monkeypatch.chdir(tmp_path)
    assert suite_id("./mine/") == str((tmp_path / "mine").resolve())


@pytest.mark.django_db
def test_a_run_records_its_suite_by_its_resolved_name():
    run = eval_run_start(suite=str(OFFLINE) + "/", bundle=None, live=False)
    assert run.suite == "offline"


@pytest.mark.django_db(transaction=True)
def test_the_wall_time_starts_at_submission_not_while_the_repository_is_built(monkeypatch, tmp_path):
    def slow_builder(self, target, wheels):
        time.sleep(0.5)
        raise SuiteError("the builder failed")

    monkeypatch.setattr(Repository, "build", slow_builder)
    case = replace(_case({}), kind="ticket", repository=Repository(builder=tmp_path / "b.py"))
    row = eval_case_run(eval_run_start(suite="offline", bundle=None, live=False), case)
    assert row.error == "SuiteError: the builder failed" and row.wall_s == 0.0  # broke before it was submitted


@pytest.mark.django_db
def test_hidden_tests_that_break_keep_the_case_measures_and_mark_the_hidden_result(acme_project, monkeypatch):
    requirement = Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b",
                                             state="deployed")
    Step.objects.create(requirement=requirement, key="po_clarify", state="done")

    def broken(requirement, case):
        raise RuntimeError("the baseline's environment could not be built")

    monkeypatch.setattr(hidden, "judge", broken)
    run = eval_run_start(suite="offline", bundle=None, live=False)
    row = running._record(run, _case({HIDDEN: PARAMETRIZED}), requirement, 12.0)
    assert (row.outcome, row.hidden, row.hidden_total, row.wall_s) == ("deployed", "error", 3, 12.0)
    assert row.hidden_error == "RuntimeError: the baseline's environment could not be built" and row.broke
    assert row.attempts == {"product_owner": {"steps": 1, "runs": 0}}


@pytest.mark.django_db
def test_gate_verdicts_are_listed_in_the_order_they_came(acme_project):
    requirement = Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b")
    start = timezone.now()
    ReviewTask.objects.create(organization=acme_project.organization, requirement=requirement, kind="story_approval",
                              question="?", sla_deadline=start + timedelta(days=1), decision="approve",
                              decided_by_policy="eval", decided_at=start)
    review = artifact_store(requirement, kind="review", name="code_review", content={"verdict": "approve"})
    Artifact.objects.filter(pk=review.pk).update(created_at=start + timedelta(minutes=1))
    qc = artifact_store(requirement, kind="test_report", name="qc", content={}, metadata={"ok": True})
    Artifact.objects.filter(pk=qc.pk).update(created_at=start + timedelta(minutes=2))
    ReviewTask.objects.create(organization=acme_project.organization, requirement=requirement,
                              kind="deployment_approval", question="?", sla_deadline=start + timedelta(days=1),
                              decision="approve", decided_by_policy="eval", decided_at=start + timedelta(minutes=3))
    assert [gate["gate"] for gate in gate_verdicts(requirement)] == [
        "story_approval", "code_review", "quality", "deployment_approval"]


@pytest.mark.django_db
def test_a_run_for_an_organization_names_a_real_one(acme):
    for slug in ("nowhere", "eval"):
        with pytest.raises(CommandError, match=f"--organization {slug}: no such organization"):
            call_command("aiteam_eval", "run", "--suite", "offline", "--organization", slug, stdout=StringIO())
    assert not EvalRun.objects.exists()


@pytest.mark.django_db
def test_an_offline_run_with_workers_is_refused_before_it_stores_anything(settings):
    """With a broker the steps run on workers, whose provider is not the case's cassette: every case would fail."""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    with pytest.raises(CommandError, match="run it on the embedded default .* or against the workers with --live"):
        call_command("aiteam_eval", "run", "--suite", "offline", stdout=StringIO())
    assert not EvalRun.objects.exists()


def test_the_table_and_the_summary_give_the_share_of_the_input_read_from_cache():
    """The API's three parts of the input add up (ADR 38): the share is what was read over all three."""
    cases = [EvalCase(name="warm", outcome="deployed", hidden="full", input_tokens=500, output_tokens=100,
                      cache_read_tokens=3000, cache_creation_tokens=500, cost_usd=Decimal("0.01")),
             EvalCase(name="cold", outcome="deployed", hidden="full", input_tokens=1000, output_tokens=100,
                      cache_creation_tokens=1000, cost_usd=Decimal("0.01")),
             EvalCase(name="broke", outcome="failed", hidden="not_run", cost_usd=Decimal(0))]
    totals = report.summary(cases)
    assert (totals["cache_read_tokens"], totals["input_tokens_in_all"]) == (3000, 6000)
    assert totals["cache_share"] == 0.5
    rows = {line.split()[0]: line.split() for line in report.table(cases).splitlines()[2:]}
    cached = report.COLUMNS.index("cached")
    assert (rows["warm"][cached + 1], rows["cold"][cached + 1], rows["broke"][cached + 1]) == ("75%", "0%", "-")
    assert report.cache_line(cases) == "input tokens read from cache: 3000 of 6000 (50%)"
    assert report.summary([])["cache_share"] is None and report.cache_line([]).endswith("0 of 0 (-)")
