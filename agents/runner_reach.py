"""Code that reaches into the test runner, found by reading it (``ast``; nothing is imported or run).

The engineer's code runs inside the process that runs its tests and writes their report, so it can forge the
report (a no-op ``Function.runtest``, a plugin that rewrites outcomes, a rewritten junit file). The runner's
canaries (``agents/sandbox/canary.py``) catch tampering that does not single them out; this check refuses, at
review, the plain ways in: pytest's internals and hooks, the interpreter's module table, frames, ``builtins``,
exit hooks and finalizers, signal handlers, redirected descriptors and streams, code built from strings, and
strings naming the runner's parts. Product code has no business with any of it; tests may use pytest's public API
(``raises``, ``mark``, fixtures, ...), patch ``builtins`` (say, ``input``) and replace ``sys.stdout``. A deny-list:
a name assembled at run time and resolved by a helper it does not list gets past it, which is why the canaries and
the outcome stream exist (ADR 25 says what each catches).
"""
from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import PurePosixPath

from agents import python_ast

# Modules of the runner and of the interpreter's own machinery: product code never needs them.
RUNNER_MODULES = frozenset({"pytest", "_pytest", "pluggy", "py", "coverage", "iniconfig"})
PRODUCT_ONLY_MODULES = frozenset({"builtins", "atexit", "ctypes", "_ctypes", "faulthandler"})
# pytest's public API for writing tests; anything else of pytest's (Function, Session, hookimpl, ...) is the runner.
TEST_API = frozenset({
    "raises", "approx", "mark", "fixture", "param", "skip", "fail", "xfail", "importorskip", "warns",
    "deprecated_call", "MonkeyPatch", "FixtureRequest", "CaptureFixture", "LogCaptureFixture", "TempPathFactory",
    "RaisesGroup", "RaisesExc",
})
# (module, attribute): the interpreter's module table, import hooks, tracing, frames, the live heap, a hard exit;
# code that runs after the tests (finalizers, exit hooks, collection callbacks) and descriptor redirection, which
# could rewrite a report after the fact or blind the runner's outcome pipe.
REACH_ATTRIBUTES = frozenset({
    ("sys", "modules"), ("sys", "meta_path"), ("sys", "path_hooks"), ("sys", "settrace"), ("sys", "setprofile"),
    ("sys", "_getframe"), ("sys", "addaudithook"), ("os", "_exit"), ("gc", "get_objects"), ("gc", "get_referrers"),
    ("inspect", "stack"), ("inspect", "currentframe"), ("inspect", "getouterframes"), ("threading", "settrace"),
    ("importlib", "import_module"), ("importlib", "__import__"),
    ("weakref", "finalize"), ("threading", "_register_atexit"), ("gc", "callbacks"), ("os", "dup"), ("os", "dup2"),
    ("os", "closerange"),
})
# Product code has no need to take over signals or replace the interpreter's streams; a test may (a handler under
# test, a captured stdout).
PRODUCT_ONLY_ATTRIBUTES = frozenset({("signal", "signal"), ("signal", "setitimer")})
STREAMS = frozenset({"stdout", "stderr", "__stdout__", "__stderr__"})
# Attributes that lead into frames, closures and the runner's objects whatever they are reached through.
REACH_NAMES = frozenset({
    "__globals__", "__subclasses__", "__code__", "__closure__", "__builtins__", "f_back", "f_globals", "f_locals",
    "tb_frame", "gi_frame", "pluginmanager", "runtest", "pytest_plugins",
})
CODE_FROM_STRINGS = frozenset({"exec", "eval", "compile", "__import__", "__builtins__"})
# Strings that name the runner's parts or its report, lower-cased; product code may not even say "pytest".
TEST_STRINGS = ("_pytest", "junit", "report.xml", "runtest", "makereport", "pluginmanager", "conftest", "~aiteam",
                "aiteam_outcome")
PRODUCT_STRINGS = (*TEST_STRINGS, "pytest", "/proc/self/fd")


def is_test_file(path: str) -> bool:
    name = PurePosixPath(path).name
    return path.startswith("tests/") or "/tests/" in path or name.startswith("test_") or name.endswith("_test.py")


def reach_findings(files: Iterable[tuple[str, str]]) -> list[str]:
    """`path:line: what` for each reach into the runner in the given (path, Python source) pairs."""
    findings: list[str] = []
    for path, source in files:
        try:
            tree = python_ast.parse(source, filename=path)
        except (SyntaxError, ValueError):
            continue  # not this check's finding: the tests (and ruff) report it
        except python_ast.NOT_PARSED as exc:  # what the check cannot read, it cannot vouch for
            findings.append(f"{path}:1: nests deeper than this check can read ({type(exc).__name__}): split the "
                            "expression, or generate the data as a file the code reads")
            continue
        findings += [f"{path}:{line}: {what}" for line, what in sorted(_reaches(tree, test=is_test_file(path)))]
    return findings


def _reaches(tree: ast.Module, *, test: bool) -> Iterator[tuple[int, str]]:
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        what = _import(node, test) or _attribute(node, test) or _name(node) or _hook(node) or _replaced(node, test)
        if not what and isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            what = _string(node.value, test)
        if what:
            yield node.lineno, what


def _import(node: ast.AST, test: bool) -> str:
    forbidden = RUNNER_MODULES | (frozenset() if test else PRODUCT_ONLY_MODULES)
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names
                 if alias.name.split(".")[0] in forbidden
                 and not (test and alias.name == "pytest" and alias.asname is None)]  # an alias would hide pytest.X
        return f"imports {', '.join(names)}, part of the test runner or the interpreter's machinery" if names else ""
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        top = node.module.split(".")[0]
        pairs = {(node.module, alias.name) for alias in node.names}
        if top == "pytest" and test and all(name in TEST_API for _, name in pairs):
            return ""
        if top in forbidden or pairs & (REACH_ATTRIBUTES | (frozenset() if test else PRODUCT_ONLY_ATTRIBUTES)):
            return f"imports from {node.module} what reaches into the test runner or the interpreter"
    return ""


def _attribute(node: ast.AST, test: bool) -> str:
    if not isinstance(node, ast.Attribute):
        return ""
    if node.attr in REACH_NAMES:
        return f"reaches for .{node.attr}"
    if isinstance(node.value, ast.Name):
        owner = node.value.id
        if (owner, node.attr) in REACH_ATTRIBUTES or (not test and (owner, node.attr) in PRODUCT_ONLY_ATTRIBUTES):
            return f"uses {owner}.{node.attr}"
        if owner == "pytest" and not (test and node.attr in TEST_API):
            return f"uses pytest.{node.attr}, which is the runner's, not its API for tests"
    return ""


def _replaced(node: ast.AST, test: bool) -> str:
    """Product code assigning sys.stdout or sys.stderr (reading them is fine): the runner's output is not its to
    take over."""
    if test or not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return ""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for part in (part for target in targets for part in ast.walk(target)):  # also `sys.stdout, x = ...`
        if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "sys" \
                and part.attr in STREAMS:
            return f"replaces sys.{part.attr}"
    return ""


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name) and node.id in CODE_FROM_STRINGS:
        return f"uses {node.id}: code built from strings cannot be reviewed"
    return ""


def _hook(node: ast.AST) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("pytest_"):
        return f"defines the pytest hook {node.name}"
    return ""


def _string(value: str, test: bool) -> str:
    lowered = value.lower()
    said = next((marker for marker in (TEST_STRINGS if test else PRODUCT_STRINGS) if marker in lowered), "")
    return f"a string naming the test runner's parts ({said!r})" if said else ""
