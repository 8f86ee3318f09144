"""Senior Engineer: the files of one task (or of a fix) and the context that asks for them."""
from __future__ import annotations

import posixpath
from typing import ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from agents.ci_paths import devops_owned
from agents.runner_reach import reach_findings
from agents.schemas.base import Strict
from agents.schemas.design import Interface, PlannedTask, TechnicalSpecOutput, safe_path

# QC's acceptance tests and the CI workflow are checks on the engineer's work, not the engineer's to edit;
# nor are files Python or pytest load on their own, which could change how the tests run (the sandbox runs
# pytest with its own configuration, so a project's pytest.ini, tox.ini or setup.cfg cannot).
ACCEPTANCE_TESTS = "tests/acceptance/"
LOADED_ON_THEIR_OWN = ("conftest.py", "sitecustomize.py", "usercustomize.py")


def engineer_may_not_write(path: str) -> bool:
    """QC's acceptance tests, or a CI service's configuration (agents.ci_paths: it can reach the CI's secrets)."""
    return path.startswith(ACCEPTANCE_TESTS) or devops_owned(path)
# Top-level modules that would stand in for the test runner's own (pytest, coverage and what they import).
RUNNER_MODULES = frozenset({"pytest", "_pytest", "py", "pluggy", "iniconfig", "coverage"})
# Where an interpreter finds modules on its own: the user site (HOME is the sandbox's scratch dir, so
# .local/lib/pythonX.Y/site-packages there), any site-packages, and the .pth files that extend sys.path. Other
# dot-directories stay writable (.github/ is DevOps' and refused above only as such).
USER_SITE_DIR = ".local/"
SITE_DIRS = ("site-packages", "dist-packages")


def _shadows_runner(path: str) -> bool:
    """A module that would be imported in place of the runner's, or from a directory Python searches on its own."""
    parts = path.split("/")
    return (parts[0].removesuffix(".py") in RUNNER_MODULES or path.startswith(USER_SITE_DIR)
            or any(part.endswith(SITE_DIRS) for part in parts[:-1]) or path.endswith(".pth"))


class SourceFile(Strict):
    path: str
    content: str = Field(max_length=100_000)

    @field_validator("path")
    @classmethod
    def _safe(cls, path: str) -> str:
        if not safe_path(path):
            raise ValueError("a path must be relative, in normal form, without '..', with a known extension")
        return path


class EngineerContext(Strict):
    STABLE: ClassVar[tuple[str, ...]] = ("interfaces",)  # alike in each call: cached (ADR 38)

    task: PlannedTask
    interfaces: list[Interface]
    acceptance: list[str]
    existing_files: list[SourceFile] = []
    attempt: int = 1
    planned_elsewhere: list[str] = []  # the files the plan gives the other tasks: not this task's to write

    def foreign(self, paths: list[str]) -> list[str]:
        """Which of `paths` this task may not write: another task's planned file, a file already in the workspace
        that is not this task's, or a new file outside the folders of its planned files (docs/adr/0026)."""
        own, elsewhere = set(self.task.files), set(self.planned_elsewhere)
        existing = {f.path for f in self.existing_files}
        folders = {posixpath.dirname(f) for f in own}
        return [p for p in paths if p not in own and (p in elsewhere or p in existing
                                                      or posixpath.dirname(p) not in folders)]


class FixContext(Strict):
    attempt: int
    files: list[SourceFile]
    failing_tests: list[str] = []
    output_tail: str = ""
    review_notes: list[str] = []
    guidance: list[str] = []


class EngineerOutput(Strict):
    """Source and test files to write into the workspace (whole files, not patches)."""

    reasoning: str = Field(min_length=1, max_length=4000)
    files: list[SourceFile] = Field(min_length=1, max_length=30)

    @field_validator("files")
    @classmethod
    def _own_files_only(cls, files: list[SourceFile]) -> list[SourceFile]:
        paths = [f.path for f in files]
        if len(set(paths)) != len(paths):
            raise ValueError("each path at most once")
        foreign = [p for p in paths if engineer_may_not_write(p) or p.rsplit("/", 1)[-1] in LOADED_ON_THEIR_OWN
                   or _shadows_runner(p)]
        if foreign:
            raise ValueError(f"these belong to QC or DevOps (or could change how tests run): {foreign}")
        return files

    @field_validator("files")
    @classmethod
    def _no_reach_into_the_runner(cls, files: list[SourceFile]) -> list[SourceFile]:
        """The code runs inside the process that writes its test report: it may not touch the runner (ADR 25)."""
        findings = reach_findings((f.path, f.content) for f in files if f.path.endswith(".py"))
        if findings:
            raise ValueError("code may not reach into the test runner (the tests' report must come from the tests): "
                             f"{'; '.join(findings[:10])}")
        return files

    @model_validator(mode="after")
    def _planned_files_only(self, info: ValidationInfo) -> EngineerOutput:
        """Against a task's context: the task writes its planned files and new files beside them, never another
        task's (a later task once emptied an earlier one's tests, and the loss was delivered)."""
        context = info.context
        foreign = context.foreign([f.path for f in self.files]) if isinstance(context, EngineerContext) else []
        if foreign:
            raise ValueError(f"these files are not task {context.task.key}'s to write: {foreign}; its files are "
                             f"{context.task.files} (new files may go beside them); leave other tasks' files as "
                             "they are")
        return self


class CodeReviewContext(Strict):
    STABLE: ClassVar[tuple[str, ...]] = ("spec",)  # alike in each call: cached (ADR 38)

    diff_summary: list[str]
    files: list[SourceFile]
    tests_passed: int
    acceptance: list[str]
    round: int
    spec: TechnicalSpecOutput | None = None  # what the code was built against, to spot an inconsistent spec
    lost_tests: list[str] = []  # tests written or run before that the self-test no longer ran


class CodeReviewVerdict(Strict):
    """A tech lead's code review: approve, or request changes with concrete notes on the code and, apart,
    findings that the spec itself is inconsistent (those go to the architect, not the engineer)."""

    verdict: Literal["approve", "request_changes"]
    reasoning: str = Field(min_length=1, max_length=4000)
    notes: list[str] = []
    spec_issues: list[str] = Field(default=[], description="contradictions or gaps in the spec itself, one per item")
    test_losses: str = Field(default="", max_length=2000,
                             description="when lost_tests is given and you approve: why those tests may go")

    @model_validator(mode="after")
    def _notes_when_changes(self) -> CodeReviewVerdict:
        if self.verdict == "request_changes" and not (self.notes or self.spec_issues):
            raise ValueError("a request_changes verdict needs at least one note or spec issue")
        if self.verdict == "approve" and self.spec_issues:
            raise ValueError("an approve verdict cannot report spec issues; request changes instead")
        return self

    @model_validator(mode="after")
    def _lost_tests_answered(self, info: ValidationInfo) -> CodeReviewVerdict:
        """Against the review's context: tests that disappeared are approved only with a stated reason, so a
        task emptying another's tests never passes review silently (docs/adr/0026)."""
        lost = getattr(info.context, "lost_tests", None) or []
        if lost and self.verdict == "approve" and not self.test_losses.strip():
            raise ValueError(f"these tests were there before and did not run now: {lost[:20]}; approve only with "
                             "the reason they may go in test_losses, or request changes to restore them")
        return self
