"""The ticket corpus (tests/ticket_corpus) holds at the leaf level: each repository builds with its history and its
tests pass at base, the known fix applies onto the base files, the team's answers validate, QC's and the hidden
tests fail at base and pass after the fix in the sandbox (with the repository's environment built from local
wheels), and the negative controls are what they claim: an empty diff, a broken passing test, 400 lines."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import ValidationError

from agents.edits import Files, read_files, unified_diff
from agents.environments import (
    PackageSources,
    baseline_from,
    compare,
    detect_test_command,
    prepare_environment,
    run_repository,
)
from agents.environments.wheels import repack_installed
from agents.repo.scope import measure
from agents.sandbox import SandboxLimits
from agents.schemas import BugTicketOutput, CodeReviewVerdict, QCContext, QCOutput, TicketPlanContext, TicketPlanOutput
from agents.schemas.edits import EditsOutput
from agents.schemas.tickets import Ticket
from agents.schemas.triage import TriageOutput
from agents.translators import ticket_to_criteria
from tests.repo_history import git
from tests.ticket_corpus import CONTROLS, DELIVERED, ENTRIES, FLAGGED, OUTCOMES, REFUSED, STOPPED, Entry
from tests.ticket_corpus.base import Built, apply, build, checkout, ids_of_tests, qc_files

pytestmark = pytest.mark.xdist_group("sandbox_uid")  # with the other sandbox modules: one run at a time
LIMITS = SandboxLimits(timeout_s=60, cpu_s=30, memory_bytes=1024**3, max_output_chars=8000)
KEYS = sorted(ENTRIES)


class WorkTree:
    """An engineer's context as the lifecycle gives it: the files as they stand, so the answer is checked by
    applying it (agents.edits.CurrentFiles)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def current_files(self, paths: Sequence[str]) -> Files:
        return read_files(self.root, paths)


@pytest.fixture(scope="module")
def repositories(tmp_path_factory) -> dict[str, Built]:
    return {key: build(ENTRIES[key], tmp_path_factory.mktemp(key)) for key in KEYS}


@pytest.fixture(scope="module")
def runner_wheels(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("runner")
    repack_installed(folder, ["pytest"])
    return folder


def _environment(built: Built, checkout_root: Path, runner: Path, cache: Path):
    links = (built.wheelhouse,) if built.wheelhouse else ()
    return prepare_environment(checkout_root, cache_dir=cache, sources=PackageSources(find_links=links,
                                                                                      runner_wheels=runner))


def _own_tests(entry: Entry) -> list[str]:
    return ids_of_tests({p: t for p, t in entry.files_at_base.items() if p.startswith("tests/")})


@pytest.mark.parametrize("key", KEYS)
def test_each_repository_builds_on_main_with_its_history(key, repositories):
    entry, built = ENTRIES[key], repositories[key]

    subjects = git(built.origin, "log", "--format=%s", "main").splitlines()

    assert subjects == [message for message, _ in reversed(entry.commits)] and len(subjects) >= 3
    assert entry.kind in ("bug", "feature", "change") and entry.expected == DELIVERED
    assert (built.work / "src").is_dir() is (entry.layout == "src")


@pytest.mark.parametrize("key", KEYS)
def test_the_known_fix_applies_onto_the_base_files_within_the_scope_limits(key, repositories):
    entry, built = ENTRIES[key], repositories[key]

    answer = EditsOutput.model_validate(entry.fix, context=WorkTree(built.work))  # refused here if a block missed
    applied = apply(entry.fix, built.work)
    diff = unified_diff(built.base_files(entry.fixed_paths), applied)

    assert applied.ok and answer.edits and diff.count("\n@@ ") >= 1
    assert measure(diff).reasons() == [], measure(diff).to_dict()


@pytest.mark.parametrize("key", KEYS)
def test_the_team_answers_validate_and_never_show_the_hidden_tests(key):
    entry = ENTRIES[key]
    answers = entry.answers()
    ticket = Ticket(title=entry.title, summary=entry.summary, acceptance_criteria=list(entry.criteria))
    plan = TicketPlanOutput.model_validate(answers["plan"], context=TicketPlanContext(ticket=ticket))
    qc_context = QCContext(criteria=ticket_to_criteria(ticket), interfaces=plan.interfaces, modules=[])

    assert TriageOutput.model_validate(answers["triage"]).kind == entry.kind
    assert BugTicketOutput.model_validate(answers["clarify"]).acceptance_criteria == list(entry.criteria)
    assert QCOutput.model_validate(answers["qc"], context=qc_context).coverage
    assert CodeReviewVerdict.model_validate(answers["code_review"]).verdict == "approve"
    assert [f["path"] for f in answers["localize"]["files"]] == entry.fixed_paths == plan.tasks[0].files
    shown = json.dumps(answers)
    assert not [name for name in ids_of_tests(entry.hidden) if name.split("::")[1] in shown]
    assert not [path for path in entry.hidden if path in shown]


@pytest.mark.parametrize("key", KEYS)
def test_in_the_sandbox_qc_and_hidden_tests_fail_at_base_and_pass_after_the_fix(key, repositories, runner_wheels,
                                                                                 tmp_path, tmp_path_factory):
    entry, built = ENTRIES[key], repositories[key]
    extra = {**entry.hidden, **qc_files(entry)}
    base = checkout(built.work, tmp_path / "base", extra=extra)
    fixed = checkout(built.work, tmp_path / "fixed", applied=apply(entry.fix, built.work), extra=extra)
    environment = _environment(built, base, runner_wheels, tmp_path_factory.getbasetemp() / "repo-envs")
    command = detect_test_command(base)

    at_base = run_repository(base, command, environment, limits=LIMITS).outcomes
    after = run_repository(fixed, command, environment, limits=LIMITS).outcomes

    own = _own_tests(entry)
    assert own and {at_base.get(test) for test in own} == {"passed"}, at_base
    own_base = {test: at_base[test] for test in own}
    hidden, qc = ids_of_tests(entry.hidden), ids_of_tests(qc_files(entry))
    judged = compare(baseline_from(own_base, own_base), after, reproductions=hidden, reproductions_at_base=at_base)
    assert judged.ok, judged.to_dict()
    failing_at_base = [test for test in qc if at_base.get(test) != "passed"]
    # a bug's QC tests are its reproductions, each failing at base; a feature's may also keep what already worked
    assert failing_at_base == qc if entry.kind == "bug" else len(failing_at_base) >= 1, at_base
    assert set(after.values()) == {"passed"} and set(hidden + qc) <= set(after), after
    # tox.ini's `deps = pytest` (retry-capped-delay's) is a test dependency too
    assert [r for r in environment.requirements if r != "pytest"] == [f"{w.name}=={w.version}" for w in entry.wheels]


def test_the_empty_control_is_refused_as_changing_nothing(repositories):
    control = CONTROLS["empty-change"]
    built = repositories[control.entry.key]

    applied = apply(control.answer, built.work)

    assert not applied.ok and applied.changed == {} and control.expected == REFUSED
    assert [p.kind for p in applied.problems] == ["no_change"]
    assert "changes nothing" in applied.repair_request()
    with pytest.raises(ValidationError, match="must change something"):
        EditsOutput.model_validate({"reasoning": "Nothing to do.", "edits": []})


def test_the_breaking_control_fails_a_test_that_passed_at_base(repositories, runner_wheels, tmp_path,
                                                               tmp_path_factory):
    control = CONTROLS["breaks-a-passing-test"]
    built = repositories[control.entry.key]
    base = checkout(built.work, tmp_path / "base")
    broken = checkout(built.work, tmp_path / "broken", applied=apply(control.answer, built.work))
    environment = _environment(built, base, runner_wheels, tmp_path_factory.getbasetemp() / "repo-envs")
    command = detect_test_command(base)

    at_base = run_repository(base, command, environment, limits=LIMITS).outcomes
    after = run_repository(broken, command, environment, limits=LIMITS).outcomes
    judged = compare(baseline_from(at_base, at_base), after)

    assert "tests/test_slug.py::test_spaces_become_dashes" in judged.broken and not judged.ok
    assert control.expected == STOPPED


def test_the_400_line_control_is_over_the_scope_guards_limit(repositories):
    control = CONTROLS["over-400-lines"]
    built = repositories[control.entry.key]
    applied = apply(control.answer, built.work)

    scope = measure(unified_diff(built.base_files(list(applied.changed)), applied))

    assert applied.ok and scope.lines_changed >= 400 and control.expected == FLAGGED
    assert scope.reasons() == [f"{scope.lines_changed} lines changed, over the limit of 300"]


def test_every_expected_outcome_is_described():
    expected = {entry.expected for entry in ENTRIES.values()} | {c.expected for c in CONTROLS.values()}

    assert expected == set(OUTCOMES) and len(ENTRIES) == 6 and len(CONTROLS) == 3
