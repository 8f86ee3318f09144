"""The tests a project's files define, read from its source (never imported) before the run.

The report is written inside the process that runs the code under test, so it can leave a failing test out as
easily as it can mark it passed. What the files define, read by the worker from the trusted copy, is what the
report must account for. Only what pytest surely collects with the runner's fixed configuration is listed
(default python_files, python_classes, python_functions and norecursedirs): a test listed here and absent from
the report is a forged report, so doubtful cases (a def under an `if`, a class with ``__init__``, a symlink, a
file that does not parse) are left out rather than guessed.
"""
from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

from agents import python_ast
from agents.sandbox.report import read_untrusted

# pytest's default norecursedirs, plus what its collection skips on its own
_SKIPPED_DIRS = frozenset({"_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}", "__pycache__"})

_PLAIN_BASES = frozenset({"object", "TestCase", "unittest.TestCase"})


def expected_tests(root: Path) -> list[str]:
    """pytest ids without parameters ("tests/test_a.py::TestX::test_y") of every test the files define."""
    return [test for path in _test_files(root)
            for test in module_tests(path.relative_to(root).as_posix(), read_untrusted(path) or b"")]


def module_tests(module: str, source: bytes) -> list[str]:
    """pytest ids without parameters of the tests one module's source defines, `module` its path from the root."""
    try:
        tree = python_ast.parse(source, filename=module)
        return [] if _disabled(tree.body) else [f"{module}::{name}" for name in dict.fromkeys(_tests_in(tree.body))]
    except python_ast.NOT_PARSED:
        return []  # pytest reports it as a collection error, which the report must show anyway


def _test_files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):  # does not follow symlinked directories
        dirnames[:] = sorted(d for d in dirnames if not _skipped_dir(Path(dirpath, d)))
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if (name.startswith("test_") or name.endswith("_test.py")) and name.endswith(".py") \
                    and not path.is_symlink():
                yield path


def _skipped_dir(path: Path) -> bool:
    name = path.name
    return (name.startswith(".") or name.endswith(".egg") or name in _SKIPPED_DIRS or path.is_symlink()
            or (path / "pyvenv.cfg").exists())  # pytest skips virtual environments


def _tests_in(body: list[ast.stmt], prefix: str = "") -> Iterator[str]:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test") \
                and not any("fixture" in ast.unparse(d) for d in node.decorator_list):
            yield prefix + node.name
        elif isinstance(node, ast.ClassDef) and _collected_class(node):
            yield from _tests_in(node.body, f"{prefix}{node.name}::")


def _collected_class(node: ast.ClassDef) -> bool:
    """A Test* class pytest collects: no base that could bring an ``__init__`` (a unittest.TestCase is collected
    as such), none of its own, not disabled."""
    bases = {ast.unparse(base) for base in node.bases}
    return (node.name.startswith("Test") and bases <= _PLAIN_BASES and not _disabled(node.body)
            and not any(isinstance(n, ast.FunctionDef) and n.name in ("__init__", "__new__") for n in node.body))


def _disabled(body: list[ast.stmt]) -> bool:
    """`__test__ = <anything>` in a module or class: pytest then decides by its value, left out to be safe."""
    return any(isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__test__" for t in node.targets)
               for node in body)
