"""What an engineer's answer may write (agents/schemas/engineering.py): never QC's tests, the CI workflow or files
Python and pytest load on their own, and only paths in normal form, so no other spelling reaches those files."""
import pytest
from pydantic import ValidationError

from agents.schemas import EngineerOutput


@pytest.mark.parametrize("path", ["tests/acceptance/test_acceptance.py", ".github/workflows/ci.yml", ".gitlab-ci.yml",
                                  ".circleci/config.yml", "conftest.py",
                                  "tests/conftest.py", "sitecustomize.py", "readinglist/usercustomize.py", "pytest.py",
                                  "_pytest/main.py", "coverage/__init__.py", "pluggy.py"])
def test_an_engineer_may_not_write_qc_tests_ci_or_files_python_and_pytest_load_on_their_own(path):
    with pytest.raises(ValidationError, match="belong to QC or DevOps"):
        EngineerOutput(reasoning="x", files=[{"path": path, "content": "x"}])


@pytest.mark.parametrize("path", ["./tests/acceptance/test_acceptance.py", "tests//acceptance/test_acceptance.py",
                                  "tests/./acceptance/test_acceptance.py", "./.github/workflows/ci.yml", "a/"])
def test_a_path_must_be_in_normal_form_so_no_other_spelling_reaches_qcs_files(path):
    with pytest.raises(ValidationError, match="normal form|known extension"):
        EngineerOutput(reasoning="x", files=[{"path": path, "content": "x"}])
