"""A project's existing repository for the lifecycle's runs on one (docs/adr/0035): a small Python repository with
a bug (mean floors), a passing suite, one test that fails at base and one that reads the outside world, pushed to
a bare repository the operator's rule allows (`<local root>/<organization id>/<project id>.git`); and the
settings that make its environment offline (no index, the runner's wheelhouse from the worker's pytest)."""
from __future__ import annotations

import textwrap
from pathlib import Path

from lifecycle.models import Project
from tests.repo_history import commit_files, git

CALC = "def add(a, b):\n    return a + b\n\n\ndef mean(values):\n    return sum(values) // len(values)\n"
TESTS = textwrap.dedent("""\
    from pathlib import Path

    from calc import add, mean


    def test_add():
        assert add(2, 3) == 5


    def test_mean_of_equal_values():
        assert mean([2, 2]) == 2


    def test_depends_on_a_coin():
        assert Path(__file__).with_name("coin.txt").read_text() == "heads"


    def test_known_failure():
        assert add(0.1, 0.2) == 0.3
    """)
FILES = {"calc.py": CALC, "conftest.py": "", "tests/test_calc.py": TESTS}  # conftest.py: pytest, by name
ADD, MEAN, COIN, KNOWN = (f"tests/test_calc.py::{name}" for name in
                          ("test_add", "test_mean_of_equal_values", "test_depends_on_a_coin", "test_known_failure"))


def offline(settings, cache: Path, wheels: Path) -> None:
    """Environments built from local wheels only, in a cache shared by the session's repository tests."""
    settings.AITEAM_ENVIRONMENTS_ROOT = cache
    settings.AITEAM_PIP_INDEX_URL = ""
    settings.AITEAM_PIP_FIND_LINKS = [wheels]


def push_repository(settings, project: Project, root: Path, files: dict[str, str] | None = None) -> Path:
    """The project's repo_url: a bare repository under the operator's local root with `files` on main (none: an
    empty repository)."""
    settings.AITEAM_GIT_LOCAL_ROOT = root
    origin = root / str(project.organization_id) / f"{project.pk}.git"
    origin.parent.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "--bare", "-b", "main", str(origin))
    if files is not None:
        work = root / f"dev-{project.pk}"
        git(root, "init", "-q", "-b", "main", str(work))
        commit_files(work, "Start calc", {path: text.encode() for path, text in files.items()})
        git(work, "push", "-q", str(origin), "main")
    Project.objects.filter(pk=project.pk).update(repo_url=str(origin))
    return origin
