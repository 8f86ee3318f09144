"""The gate's view of a run on an existing repository (docs/adr/0035): a run judged against the baseline keeps the
report's keys but fails only on what the change answers for (pass-to-pass, the tests it adds, a reproduction that
must fail at the base commit), and the gate's reasons say which. Pure, but for the base tree's export and the
environment rebuilt from it when the cache lost it."""
from __future__ import annotations

import pytest

from agents.environments import PackageSources, prepare_environment
from agents.environments.export import export_commit
from agents.environments.repository import (
    judged_report,
    recorded_command,
    recorded_environment,
)
from agents.environments.wheels import repack_installed, runner_wheelhouse
from agents.quality import QualityGates, evaluate
from agents.sandbox import SandboxLimits
from agents.sandbox.report import TestReport
from agents.sandbox.runner import RepoRun
from tests.repo_history import commit_files, git

P, F, E = "passed", "failed", "errors"
BASE = {"t.py::ok": P, "t.py::also_ok": P, "t.py::known": F, "t.py::coin": P}
PREPARED = {
    "baseline": {"outcomes": BASE, "flaky": ["t.py::coin"], "passing": ["t.py::also_ok", "t.py::ok"]},
    "test_command": {"runner": "pytest", "paths": ["tests"], "args": ["--maxfail=0"], "pythonpath": ["."],
                     "source": "conftest.py", "shown": "pytest", "plugins": []},
    "environment": {"key": "0" * 64, "reused": False, "duration_s": 1.0, "dependency_files": [], "requirements": [],
                    "notes": []},
}


def ran(outcomes: dict[str, str]) -> RepoRun:
    failing = [t for t, kind in outcomes.items() if kind in (F, E)]
    report = TestReport(passed=sum(k == P for k in outcomes.values()), failed=sum(k == F for k in outcomes.values()),
                        errors=sum(k == E for k in outcomes.values()), failing_tests=failing, exit_code=1 if failing else 0,
                        tests_run=list(outcomes))
    return RepoRun(report, outcomes)


def gate(report: dict) -> list[str]:
    return evaluate(QualityGates(all_criteria_covered=False), report, lint_findings=[], uncovered=[]).reasons


def test_a_failure_the_base_already_had_and_a_flaky_one_judge_nothing():
    report = judged_report(ran({**BASE, "t.py::coin": F, "t.py::new": P}), PREPARED)

    assert report["ok"] and report["failing_tests"] == [] and report["failed"] == 2  # the raw counts stay
    assert report["comparison"]["already_failing"] == ["t.py::known"] and report["comparison"]["judged"] == 3
    assert gate(report) == []


def test_a_broken_test_a_lost_one_and_a_failing_new_one_are_each_named():
    after = {"t.py::ok": F, "t.py::known": F, "t.py::new": E}

    report = judged_report(ran(after), PREPARED)

    assert not report["ok"] and report["failing_tests"] == ["t.py::ok", "t.py::also_ok", "t.py::new"]
    assert gate(report) == [
        "pass-to-pass: 1 test(s) that passed in both base runs fail now: t.py::ok",
        "pass-to-pass: 1 test(s) that passed in both base runs no longer run: t.py::also_ok",
        "1 new test(s) fail: t.py::new",
    ]
    assert evaluate(QualityGates(), report, lint_findings=[], uncovered=[]).pass_rate == 0.0


@pytest.mark.parametrize(("at_base", "after", "reason"), [
    (P, P, "the reproduction test r.py::bug passes at the base commit: it does not reproduce the bug"),
    (F, F, "the reproduction test r.py::bug still fails after the change (failed)"),
    (None, P, "the reproduction test r.py::bug did not run at the base commit (missing)"),
])
def test_a_reproduction_must_fail_at_the_base_commit_and_pass_after(at_base, after, reason):
    report = judged_report(ran({**BASE, "r.py::bug": after}), PREPARED, reproductions=["r.py::bug"],
                           at_base=ran({"r.py::bug": at_base} if at_base else {}))

    assert not report["ok"] and gate(report) == [reason]
    assert report["failing_tests"] == ([] if after == P else ["r.py::bug"])  # only what fails now is the engineer's


def test_a_reproduction_module_that_cannot_import_at_base_counts_as_failing_there():
    report = judged_report(ran({**BASE, "r.py::bug": P}), PREPARED, reproductions=["r.py::bug"],
                           at_base=ran({"r.py": E}))
    assert report["ok"] and gate(report) == []


def test_reproduction_tests_that_did_not_run_fail_the_gate():
    report = judged_report(ran(BASE), PREPARED, reproductions=[], at_base=ran({}))
    assert not report["ok"]
    assert gate(report) == ["QC's reproduction tests did not run: none of its test files reported a test"]


@pytest.mark.parametrize(("report", "words"), [
    ({"exit_code": 4, "errors": 1}, "refused its command line or configuration (exit 4, a usage error)"),
    ({"exit_code": 2}, "pytest was interrupted (exit 2)"),
    ({"exit_code": 3, "output_tail": "INTERNALERROR> MemoryError\n"}, "raise AITEAM_SANDBOX_MEMORY_MB (now 1024 MB"),
    ({"exit_code": -9, "killed_reason": "memory"}, "killed at the sandbox's memory limit"),
])
def test_a_run_that_did_not_really_run_the_tests_is_never_ok(report, words):
    # the audit's idna and cachetools: exit 2 or 4, no test reported, and a baseline with nothing to protect
    empty = {**PREPARED, "baseline": {"outcomes": {}, "flaky": [], "passing": []}}
    after = RepoRun(TestReport(**report), {})

    judged = judged_report(after, empty, limits=SandboxLimits())

    assert not judged["ok"] and words in judged["comparison"]["not_run"]
    assert gate(judged)[0] == judged["comparison"]["not_run"]
    assert not judged_report(RepoRun(TestReport(**report), BASE), PREPARED)["ok"]  # whatever the outcomes say


def test_reproductions_whose_base_run_did_not_run_fail_the_gate_saying_so():
    at_base = RepoRun(TestReport(exit_code=4, errors=1, output_tail="error: unrecognized arguments"), {})

    report = judged_report(ran({**BASE, "r.py::bug": P}), PREPARED, reproductions=["r.py::bug"], at_base=at_base)

    assert not report["ok"]
    assert report["comparison"]["not_run"].startswith("the reproduction tests did not run at the base commit: pytest "
                                                      "refused its command line")


def test_qcs_files_outside_the_commands_paths_are_added_to_it():
    command = recorded_command(PREPARED, ["tests/acceptance/test_a.py", "qa/test_b.py"])
    assert command.paths == ("tests", "qa/test_b.py") and command.args == ("--maxfail=0",)


def test_the_base_tree_is_exported_with_qcs_files_laid_over_it(tmp_path):
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    base = commit_files(repo, "base", {"calc.py": b"one\n"})
    commit_files(repo, "change", {"calc.py": b"two\n"})

    tree = export_commit(repo, base, tmp_path / "tree", {"tests/test_bug.py": b"def test_bug(): pass\n"})

    assert (tree / "calc.py").read_bytes() == b"one\n" and (tree / "tests/test_bug.py").is_file()
    assert not (tree / ".git").exists()
    with pytest.raises(ValueError, match="outside the checkout"):
        export_commit(repo, base, tmp_path / "again", {"../escape.py": b""})


def test_links_leading_out_of_the_tree_are_left_out_of_the_export_and_named(tmp_path):
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    (repo / "docs").mkdir()
    (repo / "docs" / "system").symlink_to("/usr/share/doc")
    (repo / "docs" / "up").symlink_to("../../outside")
    (repo / "docs" / "readme").symlink_to("../README")
    base = commit_files(repo, "base", {"README": b"hello\n", "calc.py": b"one\n"})
    skipped: list[str] = []

    tree = export_commit(repo, base, tmp_path / "tree", {"tests/test_bug.py": b""}, skipped=skipped)

    assert sorted(skipped) == ["docs/system", "docs/up"]
    assert (tree / "docs" / "readme").read_bytes() == b"hello\n" and (tree / "calc.py").is_file()
    assert not (tree / "docs" / "system").exists() and not (tree / "docs" / "up").is_symlink()
    assert export_commit(repo, base, tmp_path / "quiet") == tmp_path / "quiet"  # no list given: nothing raised


@pytest.mark.xdist_group("sandbox_uid")
def test_an_environment_the_cache_lost_is_built_again_from_the_base_tree(tmp_path):
    runner = runner_wheelhouse(tmp_path / "cache", ["pytest"])
    assert runner_wheelhouse(tmp_path / "cache", ["pytest"]) == runner and list(runner.glob("pytest-*.whl"))
    sources = PackageSources(runner_wheels=repack_installed(tmp_path / "wheels", ["pytest"])[0].parent)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "app.py").write_text("")
    built = prepare_environment(tree, cache_dir=tmp_path / "elsewhere", sources=sources)
    prepared = {**PREPARED, "environment": {"key": built.key, "dependency_files": [], "requirements": [], "notes": []}}
    asked = []

    def base_tree():
        asked.append(True)
        return tree

    again = recorded_environment(prepared, cache_dir=tmp_path / "cache", sources=sources, base_tree=base_tree)
    reused = recorded_environment(prepared, cache_dir=tmp_path / "cache", sources=sources, base_tree=base_tree)

    assert again.key == built.key and (again.venv / "bin").is_dir() and asked == [True]
    assert reused.venv == again.venv and reused.reused and asked == [True]
