"""A repository's configuration file whose values have the wrong type (a string where a table belongs, a list
where an object does) is refused saying which file, or left out with a note: never an AttributeError that routes
the preparation to an operator as aiteam's own bug."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.environments import BadTestCommand, detect_test_command
from agents.environments.requirements import collect_requirements, dependency_files


def _repo(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"tests/test_a.py": "def test_a(): pass\n", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("aiteam", ['tests = "pytest -q"\n', "tests = [1]\n", "[tests]\ncommand = [\"pytest\"]\n"])
def test_an_aiteam_file_whose_tests_is_no_table_is_refused_showing_the_format(tmp_path, aiteam):
    root = _repo(tmp_path, {".aiteam.toml": aiteam})

    with pytest.raises(BadTestCommand, match=r'\.aiteam\.toml must be TOML with a \[tests\] table.*\n\[tests\]\n'
                                             r'command = "pytest tests"'):
        detect_test_command(root)


def test_a_pyproject_whose_tool_is_no_table_is_read_as_having_none(tmp_path):
    project = '[project]\nname = "p"\ndependencies = ["attrs"]\n'
    root = _repo(tmp_path / "x", {"pyproject.toml": 'tool = "x"\n' + project})

    command = detect_test_command(root)
    requirements, _, notes = collect_requirements(root, dependency_files(root))

    assert command == detect_test_command(_repo(tmp_path / "none", {"pyproject.toml": project}))
    assert requirements == ["attrs"] and notes == []


@pytest.mark.parametrize("lock", [[], {"default": ["pytest"]}, {"default": {}, "develop": "pytest"}])
def test_a_pipfile_lock_of_another_shape_is_left_out_with_a_note(tmp_path, lock):
    root = _repo(tmp_path, {"Pipfile.lock": json.dumps(lock), "requirements.txt": "attrs\n"})

    requirements, _, notes = collect_requirements(root, dependency_files(root))

    assert requirements == ["attrs"]
    assert notes == ["Pipfile.lock not read: it is not an object whose default and develop sections are objects "
                     "(package name: its pin), as pipenv writes it"]


@pytest.mark.parametrize(("files", "note"), [
    ({"poetry.lock": "package = 5\n"}, "poetry.lock not read: its `package` is not a list of tables, as Poetry "
                                        "writes it"),
    ({"Pipfile.lock": "{not json"}, "Pipfile.lock not read: it is not JSON (Expecting property name enclosed in "
                                    "double quotes: line 1 column 2 (char 1))"),
    ({"pyproject.toml": '[project]\nname = "p"\ndependencies = ["attrs"]\n[dependency-groups]\ntest = 5\n'}, None),
    ({"pyproject.toml": '[project]\nname = "p"\n[tool.poetry.dependencies]\nattrs = {version = "^23", extras = 5}\n'},
     None),
])
def test_other_dependency_values_of_the_wrong_type_are_left_out(tmp_path, files, note):
    root = _repo(tmp_path, {**files, "requirements.txt": "attrs\n"})

    requirements, _, notes = collect_requirements(root, dependency_files(root))

    assert requirements[0] == "attrs" and notes == ([note] if note else [])
