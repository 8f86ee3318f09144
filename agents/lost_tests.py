"""Tests that were there and are gone: the self-test's check that one task (or a fix) did not undo another's
work unnoticed (docs/adr/0026). Pure: file texts and test reports in, the lost tests out.

A test is known by its file and function ("tests/test_store.py::test_add"): a parameter or a class that is
renamed keeps it the same test, and the run's ids ("tests/test_store.py::TestStore::test_add[1]") reduce to
that key."""
from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

from agents import python_ast
from agents.schemas.engineering import SourceFile


def key_of(test_id: str) -> str:
    """"tests/a.py::TestY::test_x[1-2]" → "tests/a.py::test_x"; a module's collection error ("tests/a.py") stays."""
    path, _, rest = test_id.partition("::")
    return f"{path}::{rest.split('[', 1)[0].rsplit('::', 1)[-1]}" if rest else path


def defined_tests(files: Iterable[SourceFile]) -> set[str]:
    """The tests pytest collects by default from these files: test_* functions at module level and in Test*
    classes. A file that does not parse defines none here: pytest reports it as an error of its own."""
    found = set()
    for file in (f for f in files if _test_module(f.path)):
        try:
            tree = python_ast.parse(file.content)
        except python_ast.NOT_PARSED:
            continue
        for node in tree.body:
            bodies = node.body if isinstance(node, ast.ClassDef) and node.name.startswith("Test") else [node]
            found |= {f"{file.path}::{f.name}" for f in bodies
                      if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name.startswith("test")}
    return found


def ran(report: dict[str, Any]) -> set[str] | None:
    """The keys of the tests a run ran, or None when its stored list was cut (the ids cannot say what is gone)."""
    ids = report.get("tests_run") or []
    return None if report.get("tests_run_total", len(ids)) > len(ids) else {key_of(t) for t in ids}


def lost_tests(known: set[str], report: dict[str, Any], previous: dict[str, Any] | None) -> list[str]:
    """What `report` no longer runs: a line first when fewer tests ran than in the `previous` run, then the
    `known` tests missing from it (sorted)."""
    now = ran(report)
    missing = sorted(k for k in known - now if "::" in k) if now is not None else []  # not a module's error
    before, after = _count(previous), _count(report)
    fell = [f"the tests run fell from {before} to {after}"] if previous is not None and after < before else []
    return fell + missing


def _test_module(path: str) -> bool:
    """pytest's default python_files: test_*.py and *_test.py."""
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _count(report: dict[str, Any] | None) -> int:
    if report is None:
        return 0
    return report.get("tests_run_total") or len(report.get("tests_run") or [])
