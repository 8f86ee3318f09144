"""The generated-workflow check: YAML, actionlint, the test command, and that command run for real in the sandbox."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from agents import ci_config
from agents.ci_config import check_workflow, command_lines, runs_pytest, sandbox_command
from agents.sandbox import SandboxLimits, run_tests

needs_actionlint = pytest.mark.skipif(ci_config.find_actionlint() is None,
                                      reason="actionlint is not installed beside this interpreter or on PATH")
SMALL = SandboxLimits(timeout_s=20, cpu_s=20, memory_bytes=1024**3, max_output_chars=4000)

GOOD = """\
name: CI
on:
  push:
  pull_request:
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v5
      - uses: actions/setup-python@v6
        with:
          python-version: "3.12"
      - name: Install
        run: |
          python -m pip install --upgrade pip
          pip install pytest
      - name: Test
        run: python -m pytest -q
"""


def test_a_workflow_that_installs_and_runs_pytest_passes():
    check = check_workflow(GOOD)

    if ci_config.find_actionlint() is None:
        pytest.skip("actionlint is not installed: the check rightly fails without it")
    assert check.ok, check.problems
    assert check.test_command == "python -m pytest -q"
    assert check.run_commands == ["python -m pip install --upgrade pip", "pip install pytest", "python -m pytest -q"]
    assert check.to_dict()["ok"] is True


def test_a_yaml_syntax_error_is_reported_with_its_line():
    broken = GOOD.replace("    runs-on: ubuntu-latest", "    runs-on: [ubuntu-latest")

    check = check_workflow(broken)

    assert not check.ok
    assert [p.kind for p in check.problems] == ["yaml"]
    assert check.problems[0].line is not None and check.problems[0].line >= 7


@needs_actionlint
@pytest.mark.parametrize(("change", "finding"), [
    (("        with:\n", "        colour: blue\n        with:\n"), 'unexpected key "colour"'),
    (("runs-on: ubuntu-latest", "runs-on: ${{ matrix.os }}"), 'property "os" is not defined'),
    (("run: python -m pytest -q", "run: python -m pytest -q --token ${{ secret.TOKEN }}"), 'undefined variable "secret"'),
], ids=["unknown-key", "runs-on-without-matrix", "unknown-context"])
def test_actionlint_findings_fail_the_check(change, finding):
    check = check_workflow(GOOD.replace(*change))

    assert not check.ok
    assert {p.kind for p in check.problems} == {"actionlint"}
    assert any(finding in p.message for p in check.problems), check.problems


def test_a_workflow_that_runs_no_tests_fails():
    check = check_workflow(GOOD.replace("run: python -m pytest -q", "run: python -m pip list"))

    assert not check.ok and check.test_command is None
    assert any(p.kind == "tests" and "pytest" in p.message for p in check.problems)


def test_a_missing_actionlint_is_a_problem_not_a_silent_pass(monkeypatch, tmp_path):
    monkeypatch.setattr(ci_config, "find_actionlint", lambda: None)

    assert [p.kind for p in check_workflow(GOOD).problems] == ["tooling"]
    assert "not installed" in str(check_workflow(GOOD).problems[0])
    assert "NOT linted" in check_workflow(GOOD, actionlint=tmp_path / "actionlint").problems[0].message


def test_a_broken_actionlint_is_an_infrastructure_failure_not_a_repair_request_to_the_model(monkeypatch):
    from agents.schemas import DevOpsOutput
    from lifecycle.failure_rules import Failure, Source

    monkeypatch.setattr(ci_config, "find_actionlint", lambda: None)
    with pytest.raises(ci_config.LintUnavailable, match="not installed"):  # not a ValidationError: no repair turn
        DevOpsOutput(reasoning="r", ci_workflow=GOOD, runbook="r", rollback="r")
    assert Failure(Source.STEP, "devops", error_classes=("LintUnavailable", "Exception")).infrastructure


def test_a_hanging_actionlint_times_out_as_a_problem(tmp_path):
    stuck = tmp_path / "actionlint"
    stuck.write_text("#!/bin/sh\nexec sleep 10\n")
    stuck.chmod(0o755)

    problems = check_workflow(GOOD, actionlint=stuck, timeout_s=0.3).problems

    assert [(p.kind, "timed out" in p.message) for p in problems] == [("tooling", True)]


@pytest.mark.parametrize(("line", "expected"), [
    ("python -m pytest -q", True),
    ("pytest -x tests/", True),
    ("cd app && PYTHONPATH=. python3.12 -m pytest", True),
    ("uv run pytest -q", True),
    ("coverage run -m pytest", True),
    ("pip install pytest pytest-cov", False),
    ("python -m pip install pytest", False),
    ("echo 'run pytest later'", False),
])
def test_it_recognises_commands_that_run_pytest(line, expected):
    assert runs_pytest(line) is expected


def test_run_scripts_are_split_into_command_lines():
    assert command_lines("# set up\npip install \\\n  pytest\n\npython -m pytest -q\n") == [
        "pip install pytest", "python -m pytest -q"]


def test_the_sandbox_command_uses_this_interpreter_and_writes_the_junit_report():
    assert sandbox_command("cd app && uv run pytest -q") == [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=.report.xml"]
    with pytest.raises(ValueError):
        sandbox_command("pip install pytest")


def test_the_workflows_test_command_really_runs_the_projects_tests_in_the_sandbox(tmp_path: Path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (project / "test_calc.py").write_text(textwrap.dedent("""\
        from calc import add

        def test_add():
            assert add(2, 3) == 5

        def test_add_negative():
            assert add(-1, 1) == 0
    """))
    check = check_workflow(GOOD)

    report = run_tests(project, limits=SMALL, command=sandbox_command(check.test_command))

    assert report.ok, report.output_tail
    assert (report.passed, report.failed, report.errors) == (2, 0, 0)
