"""The corpus's shapes (Entry, Control, the outcomes) and what the tests do with an entry: build its repository,
apply an answer, copy a checkout, name its tests."""
from __future__ import annotations

import ast
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.edits import Applied, apply_edits, named_paths, read_files
from agents.environments.wheels import write_wheel
from agents.schemas.edits import EditsOutput
from tests.repo_history import ENV, OWN_PATH, git

DELIVERED = "delivered"
REFUSED = "refused"
STOPPED = "stopped_at_gate"
FLAGGED = "flagged_by_scope"
OUTCOMES = {
    DELIVERED: "a branch (a pull request on a host) whose diff from the merge base is the fix; the repository's "
               "tests that passed at base still pass, QC's tests pass, the hidden tests pass on the delivered "
               "branch, and the scope is within the default limits (300 lines, 2 top-level modules)",
    REFUSED: "the engineer's answer changes nothing: it is refused as it is validated and goes back to the model "
             "as a repair request; an answer that never changes anything fails the step for a person, and nothing is "
             "delivered",
    STOPPED: "a test that passed at the base commit fails after the change: the self-test sends it back to the "
             "engineer, and when the fix fails the same way the run escalates to a person; nothing is delivered",
    FLAGGED: "the change is over the scope limits: the review page flags it and autonomous mode does not approve "
             "the deployment; a person decides",
}
REVIEW_OK = {"verdict": "approve", "reasoning": "The change does what the ticket asks, no more, with a regression "
             "test; the existing tests still pass.", "notes": []}


@dataclass(frozen=True)
class Wheel:
    name: str
    version: str
    files: dict[str, str]

    def write(self, folder: Path) -> Path:
        return write_wheel(folder, self.name, self.version, {p: t.encode() for p, t in self.files.items()})


@dataclass(frozen=True)
class Entry:
    key: str
    kind: str  # what triage should say: bug, feature or change
    title: str
    body: str
    commits: tuple[tuple[str, dict[str, str]], ...]
    summary: str  # the clarified ticket's
    criteria: tuple[str, ...]  # its acceptance criteria: QC's coverage names them AC-1, AC-2, ...
    interface: dict[str, str]  # the public interface the fix touches (the plan's)
    fix: dict[str, Any]  # the engineer's answer, EditsOutput
    qc: dict[str, Any]  # QC's answer, QCOutput
    hidden: dict[str, str]  # path -> test module: judges the delivered branch, never shown to the team
    layout: str = "flat"  # or "src"
    wheels: tuple[Wheel, ...] = ()
    expected: str = DELIVERED

    @property
    def files_at_base(self) -> dict[str, str]:
        files: dict[str, str] = {}
        for _message, changed in self.commits:
            files.update(changed)
        return files

    @property
    def fixed_paths(self) -> list[str]:
        return named_paths(EditsOutput.model_validate(self.fix))

    def answers(self) -> dict[str, dict[str, Any]]:
        """The team's answers for this ticket, by step, as a cassette or a scripted provider serves them."""
        criteria = list(self.criteria)
        return {
            "triage": {"kind": self.kind, "reason": f"{self.title}: {'a defect in' if self.kind == 'bug' else 'a change to'} "
                       "what the repository already does."},
            "clarify": {"verdict": "clear", "reasoning": "The ticket names the function, the input and the expected "
                        "result.", "summary": self.summary, "objectives": [self.title], "out_of_scope": [],
                        "assumptions": [], "constraints": ["keep the public interface compatible"],
                        "success_metrics": [], "acceptance_criteria": criteria, "clarifying_questions": []},
            "localize": {"reasoning": f"{self.interface['name']} is where the ticket's behaviour is decided; its "
                         "tests sit beside the existing ones.", "files": self.located()},
            "plan": {"reasoning": "One small change and its regression test: one task.",
                     "interfaces": [self.interface], "tech_stack": ["Python 3.11", "pytest"],
                     "tasks": [{"key": "T1", "title": self.title, "story_refs": list(range(1, len(criteria) + 1)),
                                "files": self.fixed_paths, "depends_on": [],
                                "definition_of_done": f"{self.summary} Fixed: {'; '.join(criteria)}."}]},
            "engineer": self.fix,
            "code_review": REVIEW_OK,
            "qc": self.qc,
        }


    def located(self) -> list[dict[str, Any]]:
        """The Tech Lead's localization (tl_localize): the files the fix changes or adds, the interface's function
        named in the first file it edits."""
        edited = list(dict.fromkeys(block["path"] for block in self.fix.get("edits", [])))
        new = [f["path"] for f in self.fix.get("files", [])]
        return [{"path": path, "action": "change", "symbols": [self.interface["name"]] if path == edited[0] else [],
                 "reason": "defines the behaviour the ticket reports" if path == edited[0] else
                 "its tests, or its caller, follow the change"} for path in edited] + [
                {"path": path, "action": "new", "symbols": [], "reason": "the regression test for the ticket"}
                for path in new]


@dataclass(frozen=True)
class Control:
    """A negative control: an entry's repository and ticket with another answer, and the outcome it must get."""

    key: str
    entry: Entry
    answer: dict[str, Any]  # the engineer's, EditsOutput
    expected: str
    why: str


@dataclass(frozen=True)
class Built:
    root: Path  # the operator's local root: origin is <root>/org-1/project-1.git
    origin: Path  # bare, `main` at the base commit
    work: Path  # a clone at the base commit
    wheelhouse: Path | None  # the entry's wheels, for PackageSources(find_links=...)

    def base_files(self, paths: list[str]) -> dict[str, bytes]:
        return {p: d for p, d in read_files(self.work, paths).items() if isinstance(d, bytes)}


def build(entry: Entry, where: Path) -> Built:
    """The entry's repository under `where`: its commits on `main`, pushed to a bare origin under a local root."""
    root, work = where / "remotes", where / "work"
    origin = root / OWN_PATH
    origin.parent.mkdir(parents=True, exist_ok=True)
    git(where, "init", "-q", "--bare", "-b", "main", str(origin))
    write_history(entry, work)
    git(work, "push", "-q", str(origin), "main")
    wheelhouse = None
    if entry.wheels:
        wheelhouse = where / "wheels"
        for wheel in entry.wheels:
            wheel.write(wheelhouse)
    return Built(root, origin, work, wheelhouse)


def write_history(entry: Entry, work: Path) -> list[str]:
    """The entry's commits in a new repository at `work` (on `main`), one a day from 2026-01-01 so the same entry
    always gives the same commits; their shas, oldest first."""
    work = work.resolve()  # git runs in its parent: a relative path would land below it
    work.parent.mkdir(parents=True, exist_ok=True)
    git(work.parent, "init", "-q", "-b", "main", str(work))
    shas = []
    for day, (message, files) in enumerate(entry.commits, start=1):
        for path, text in files.items():
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_text(text, encoding="utf-8")
        date = f"2026-01-{day:02d}T12:00:00+00:00"
        dated = {**ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        subprocess.run(["git", "add", "-A"], cwd=work, env=dated, check=True, capture_output=True)
        subprocess.run(["git", "commit", "-q", "-m", message], cwd=work, env=dated, check=True, capture_output=True)
        shas.append(git(work, "rev-parse", "HEAD").strip())
    return shas


def apply(answer: dict[str, Any], work: Path) -> Applied:
    """The answer applied to the files of the work tree, as the engineer's step applies it (nothing written)."""
    edits = EditsOutput.model_validate(answer)
    return apply_edits(read_files(work, named_paths(edits)), edits)


def checkout(work: Path, target: Path, *, applied: Applied | None = None, extra: dict[str, str] | None = None) -> Path:
    """A copy of the work tree (without .git) at `target`, with an applied answer and extra files written."""
    shutil.copytree(work, target, ignore=shutil.ignore_patterns(".git"))
    if applied is not None:
        for path, data in applied.changed.items():
            (target / path).parent.mkdir(parents=True, exist_ok=True)
            (target / path).write_bytes(data)
        for path in applied.deleted:
            (target / path).unlink()
    for path, text in (extra or {}).items():
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        (target / path).write_text(text)
    return target


def ids_of_tests(files: dict[str, str]) -> list[str]:
    """`path::name` of every module-level test function of these test modules, as the sandbox's report names them."""
    return [f"{path}::{node.name}" for path, text in files.items() for node in ast.parse(text).body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test")]


def qc_files(entry: Entry) -> dict[str, str]:
    return {f["path"]: f["content"] for f in entry.qc["files"]}
