"""QC and DevOps: the acceptance view of the work, acceptance tests, CI and runbooks."""
from __future__ import annotations

from typing import ClassVar

from pydantic import Field, ValidationInfo, field_validator, model_validator

from agents.schemas.base import Strict
from agents.schemas.design import Interface
from agents.schemas.engineering import SourceFile

ACCEPTANCE_DIR = "tests/acceptance/"


class AcceptanceCriterion(Strict):
    id: str
    story: str
    criterion: str


class QCContext(Strict):
    """What QC may see: the criteria, the public interfaces, the module layout — never the engineer's tests."""

    STABLE: ClassVar[tuple[str, ...]] = ("criteria", "interfaces", "modules")  # alike in each call: cached (ADR 38)

    criteria: list[AcceptanceCriterion]
    interfaces: list[Interface]
    modules: list[str]
    guidance: list[str] = []  # criteria restated by a human for the BA, after QC could not test them as written
    findings: list[str] = []  # why the gate sent QC's last tests back: named tests that did not run


class QCOutput(Strict):
    """Acceptance tests written from the criteria, and which test covers which criterion."""

    reasoning: str = Field(min_length=1, max_length=4000)
    files: list[SourceFile] = Field(min_length=1, max_length=10)
    coverage: dict[str, list[str]] = Field(description="criterion id → names of the tests that check it")
    # optional: answers recorded before it existed still validate when they map every criterion
    untestable: dict[str, str] = Field(default={}, description="criterion id → why it cannot be tested as written")

    @field_validator("files")
    @classmethod
    def _only_acceptance_tests(cls, files: list[SourceFile]) -> list[SourceFile]:
        outside = [f.path for f in files if not f.path.startswith(ACCEPTANCE_DIR)]
        if outside:
            raise ValueError(f"QC writes only under {ACCEPTANCE_DIR}: {outside}")
        return files

    @field_validator("coverage", "untestable")
    @classmethod
    def _known_criteria(cls, answers: dict, info: ValidationInfo) -> dict:
        """Against QC's context, when given: every key is one of its criteria ids (a misspelt id would leave
        the real criterion uncovered and the gate failing for no reason the model was told)."""
        criteria = getattr(info.context, "criteria", None)
        unknown = sorted(set(answers) - {c.id for c in criteria}) if criteria is not None else []
        if unknown:
            raise ValueError(f"{info.field_name} names criteria that do not exist: {unknown}; the ids are "
                             f"{[c.id for c in criteria]}")
        return answers

    @model_validator(mode="after")
    def _every_criterion_answered(self, info: ValidationInfo) -> QCOutput:
        """Against QC's context, when given: each criterion is mapped to tests or declared untestable with a
        reason. One left out is QC's slip, not a criterion the analyst must restate (docs/adr/0026)."""
        criteria = getattr(info.context, "criteria", None) or []
        left_out = [c.id for c in criteria if not self.coverage.get(c.id) and not self.untestable.get(c.id, "").strip()]
        if left_out:
            raise ValueError(f"coverage leaves out criteria: {left_out}; name the tests that check each, or put it "
                             "in untestable with the reason it cannot be tested as written")
        return self

    @model_validator(mode="after")
    def _named_tests_exist(self) -> QCOutput:
        """Every test coverage names is a test function of these files: a name that is none would leave its
        criterion uncovered at the gate, for a reason only QC can fix."""
        missing = sorted({n for names in self.coverage.values() for n in names if not _defines(self.files, n)})
        if missing:
            raise ValueError(f"coverage names tests that no file defines: {missing}")
        return self


def _defines(files: list[SourceFile], name: str) -> bool:
    """Whether a test named as QC names it ("test_x", "TestY::test_x[1]", "tests/acceptance/a.py::test_x") is a
    function one of `files` defines."""
    function = name.split("::")[-1].split("[")[0]
    return any(f"def {function}(" in f.content for f in files)


class DevOpsContext(Strict):
    project: str
    summary: str
    tech_stack: list[str]
    files: list[str]
    test_command: str


class DevOpsOutput(Strict):
    """CI configuration, a deployment runbook and a rollback procedure."""

    reasoning: str = Field(min_length=1, max_length=4000)
    ci_workflow: str = Field(min_length=1, max_length=20_000, description="the whole .github/workflows/ci.yml")
    runbook: str = Field(min_length=1, max_length=20_000, description="Markdown")
    rollback: str = Field(min_length=1, max_length=20_000, description="Markdown")

    @field_validator("ci_workflow")
    @classmethod
    def _valid_workflow(cls, text: str) -> str:
        """Parsed and checked with actionlint; its findings go back to the model as the repair request. actionlint
        itself failing is not the model's to fix: LintUnavailable (not a ValueError) passes through pydantic."""
        from agents.ci_config import check_workflow

        check = check_workflow(text)
        check.raise_for_tooling()
        if not check.ok:
            raise ValueError("; ".join(str(p) for p in check.problems)[:2000])
        return text
