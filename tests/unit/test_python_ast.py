"""CPython 3.11's `ast.parse` is not safe from several threads at once (python/cpython#106905), and the llm queue runs
steps on a thread pool: every parse in the product goes through agents.python_ast.parse, one at a time."""
from __future__ import annotations

import ast
import gc
import re
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import django.db.models.query

from agents import python_ast

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(django.db.models.query.__file__).read_text()  # 2,700 lines: a deep tree to convert


class _Finalized:
    """Garbage whose collection runs Python code: a thread switch in the middle of another thread's parse."""

    def __del__(self) -> None:
        sum(range(50))


def _litter() -> None:
    a, b = _Finalized(), _Finalized()
    a.other, b.other = b, a


@contextmanager
def _switching_often():
    interval, threshold = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(50)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*threshold)


def _parse_from_threads(parse: Callable[[str], ast.Module], *, threads: int = 8, rounds: int = 6,
                        until_an_error: bool = False) -> list[Exception]:
    """until_an_error: each thread stops once any has failed (one failure is the proof the load breaks the parser)."""
    errors: list[Exception] = []
    expected = ast.dump(ast.parse(SOURCE))

    def work() -> None:
        for _ in range(rounds):
            if until_an_error and errors:
                return
            try:
                if ast.dump(parse(SOURCE)) != expected:
                    errors.append(AssertionError("a different tree"))
            except SystemError as exc:
                errors.append(exc)
            for _ in range(100):
                _litter()

    with _switching_often():
        workers = [threading.Thread(target=work) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    return errors


def test_the_unguarded_parser_fails_under_this_load():
    """The load below is enough to break ast.parse itself, so the helper's test that follows has teeth."""
    for _ in range(10):
        errors = _parse_from_threads(ast.parse, until_an_error=True)
        if errors:
            break
    assert any("AST constructor recursion depth mismatch" in str(e) for e in errors)


def test_parses_from_many_threads_at_once_all_succeed_through_the_helper():
    assert _parse_from_threads(python_ast.parse, threads=12, rounds=3) == []


def test_no_product_module_calls_the_parser_directly():
    direct = re.compile(r"\bast\.parse\(|\bast\.literal_eval\(|\bcompile\(")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in ("agents", "lifecycle", "aiteam")
        for path in (ROOT / package).rglob("*.py")
        if path.name != "python_ast.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if direct.search(line.replace("re.compile(", ""))
    ]
    assert offenders == []
