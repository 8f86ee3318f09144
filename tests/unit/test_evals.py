"""Evaluation suites (docs/evals.md): the offline suite's format, and a small suite end to end through
`aiteam_eval` on the replay provider, the whole team on the embedded default: a good case scores full; a case whose
delivered code fails its hidden tests is a gate false pass (QC passed it, the hidden tests did not)."""
from __future__ import annotations

import importlib.util
import json
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from lifecycle.evals.measures import critical_path_s
from lifecycle.evals.suites import SuiteError, load_case, load_suite
from lifecycle.models import EvalCase, EvalRun, ImplementationTask, MetaEvalLog, Requirement, Step
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
