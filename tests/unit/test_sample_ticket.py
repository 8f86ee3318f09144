"""The bundled ticket cassette and the sample repository of `make ticket-demo`: both come from the corpus's
SAMPLE entry, the committed files are what the scripts write, and the cassette answers that ticket's requests (and
only its) for every role whose request this branch can already build (the localization's and the engineer's on a
repository come with their steps)."""
from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from agents.llm.factory import llm_from_settings
from agents.llm.replay import CassetteMissError, ReplayProvider
from agents.roles import QC_ENGINEER, TICKET_CLARIFIER, TICKET_PLANNER, TRIAGER
from agents.schemas import BugTicketContext, QCContext, TicketPlanContext
from agents.schemas.tickets import Ticket
from agents.schemas.triage import TriageContext
from agents.translators import ticket_to_criteria
from tests.ticket_corpus import SAMPLE

HERE = Path(__file__).resolve().parents[2] / "agents" / "cassettes" / "sample_ticket"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def llm():
    return llm_from_settings(ReplayProvider.from_file(HERE / "cassette.json"))


def test_the_bundled_cassette_title_and_body_are_what_make_cassette_writes():
    for name, text in _script("make_cassette").files().items():
        assert (HERE / name).read_text(encoding="utf-8") == text, f"re-run make_cassette.py: {name} is stale"


def test_the_cassette_answers_the_sample_tickets_triage_clarification_plan_and_qc(llm):
    answers = SAMPLE.answers()
    ticket = Ticket(title=SAMPLE.title, summary=SAMPLE.summary, acceptance_criteria=list(SAMPLE.criteria))

    triage = TRIAGER.run(TriageContext(title=SAMPLE.title, body=SAMPLE.body, source="cli", key="cli-1"), llm)
    clarified = TICKET_CLARIFIER.run(BugTicketContext(title=SAMPLE.title, brief=SAMPLE.body), llm)
    plan = TICKET_PLANNER.run(TicketPlanContext(ticket=ticket), llm)
    qc = QC_ENGINEER.run(QCContext(criteria=ticket_to_criteria(ticket), interfaces=plan.interfaces,
                                   modules=["textkit/slug.py"]), llm)

    assert (triage.kind, clarified.acceptance_criteria) == ("bug", list(SAMPLE.criteria))
    assert plan.tasks[0].files == ["textkit/slug.py", "tests/test_slug.py"]
    assert qc.model_dump(exclude_defaults=True) == answers["qc"]


def test_another_ticket_is_refused_at_triage(llm):
    with pytest.raises(CassetteMissError, match="no answer recorded for this product_owner request"):
        TRIAGER.run(TriageContext(title="Crash", body="truncate crashes on a width of 0"), llm)


def test_make_repo_writes_the_same_commits_with_the_entrys_files(tmp_path, monkeypatch):
    make_repo = _script("make_repo")
    monkeypatch.chdir(tmp_path)  # a relative target, as the Makefile gives it
    heads = []
    for name in ("first", "second"):
        assert make_repo.main([f"var/{name}"]) == 0
        heads.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path / "var" / name, capture_output=True, text=True,
                                    check=True).stdout)
    tracked = subprocess.run(["git", "ls-files"], cwd=tmp_path / "var" / "first", capture_output=True, text=True,
                             check=True).stdout.split()

    assert heads[0] == heads[1] and sorted(tracked) == sorted(SAMPLE.files_at_base)
