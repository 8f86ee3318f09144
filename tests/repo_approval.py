"""A requirement on an existing repository brought to its deployment approval without the steps before it: the
project's repository (tests/repo_history.py's shop) served under the operator's local root, `base_sha` recorded, a
change committed through the workspace service, the QC report and the baseline stored, then the approval opened by
the quality service as the DevOps step would."""
from __future__ import annotations

from pathlib import Path

from django.db import transaction

from agents.schemas import SourceFile
from lifecycle.models import Project, Requirement
from lifecycle.services import quality
from lifecycle.services.artifacts import artifact_store
from lifecycle.services.development import workspace_commit
from lifecycle.states import ArtifactKind
from tests.repo_history import git, make_project

TOKEN = "ghp_repoRunTOKEN0123456789abcdef"
CART = "def total(prices):\n    return round(sum(prices), 2)\n"
FIXED_CART = "def total(prices):\n    \"\"\"The sum, rounded to cents.\"\"\"\n    return round(sum(prices, 0), 2)\n"
SMALL_CHANGE = {"src/shop/cart.py": FIXED_CART}  # 3 lines (+2 −1) in one module
TEST_NAME = "tests/test_cart.py::test_total"


def repository_project(project: Project, tmp: Path, django_settings, **fields) -> Path:
    """The shop's history as `project`'s own repository under AITEAM_GIT_LOCAL_ROOT; returns the bare origin."""
    source = make_project(tmp / "source")
    root = tmp / "operator-remotes"
    origin = root / f"{project.organization_id}/{project.pk}.git"
    origin.parent.mkdir(parents=True)
    git(tmp, "clone", "-q", "--bare", str(source.origin), str(origin))
    django_settings.AITEAM_GIT_LOCAL_ROOT = root
    Project.objects.filter(pk=project.pk).update(repo_url=str(origin), **fields)
    return origin


def main_of(origin: Path) -> str:
    return git(origin, "rev-parse", "refs/heads/main").strip()


def repository_requirement(project: Project, origin: Path, *, ticket: tuple[str, str, str] | None = ("github", "#12", ""),
                           title: str = "Document the total") -> Requirement:
    source, key, url = ticket or ("", "", "")
    return Requirement.objects.create(organization=project.organization, project=project, brief="The total needs a doc",
                                      title=title, state="ready_to_deploy", base_sha=main_of(origin),
                                      ticket_source=source, ticket_key=key, ticket_url=url,
                                      ticket_via_webhook=bool(ticket))  # as the project's webhook makes it


def commit_change(requirement: Requirement, files: dict[str, str], message: str = "T1 (attempt 1)") -> str:
    with transaction.atomic():
        locked = Requirement.objects.select_for_update().get(pk=requirement.pk)
        return workspace_commit(locked, [SourceFile(path=p, content=c) for p, c in files.items()], message)


def ask_for_deployment(requirement: Requirement, *, passed: int = 2) -> None:
    """QC's report and the baseline stored, then the deployment approval opened (quality._ask_for_deployment)."""
    with transaction.atomic():
        locked = Requirement.objects.select_for_update().get(pk=requirement.pk)
        artifact_store(locked, kind=ArtifactKind.BASELINE, name="baseline",
                       content={"outcomes": {TEST_NAME: "passed"}, "flaky": [], "passing": [TEST_NAME]})
        counts = {"passed": passed, "failed": 0, "errors": 0}
        artifact_store(locked, kind=ArtifactKind.TEST_REPORT, name="qc", content={**counts, "gate": {"reasons": []}},
                       summary="quality score 100.0: pass", metadata={"score": 100.0, "ok": True, **counts})
        quality._ask_for_deployment(locked, [], "", 1)
