"""Python source to an AST, one parse at a time in the process.

CPython 3.11's conversion of its parse tree into `ast` objects keeps a recursion counter in state shared by every
thread, so two `ast.parse` calls at once can fail with "SystemError: AST constructor recursion depth mismatch"
(python/cpython#106905). The llm queue runs steps on a thread pool; every parse in agents/ and lifecycle/ goes
through `parse` (tests/unit/test_python_ast.py checks that none bypasses it). A parse runs in C under the GIL
almost throughout, so the lock costs next to no parallelism.
"""
from __future__ import annotations

import ast
import threading

_PARSER = threading.Lock()
# What a source that does not parse here raises: a syntax error, a NUL byte (ValueError), or nesting deeper than
# the parser's stack (MemoryError) or the recursion limit (RecursionError: `"a" + "a" + ...` a few thousand terms
# long, in parsing it or in walking or unparsing its tree). The repository's own files are any of these.
NOT_PARSED = (SyntaxError, ValueError, RecursionError, MemoryError)


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source, filename)`, serialized with every other parse in the process."""
    with _PARSER:
        return ast.parse(source, filename=filename)
