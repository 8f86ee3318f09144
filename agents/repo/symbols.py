"""Python definitions and the names each file uses, from the stdlib `ast`.

A definition is a class, function or method with its line range and a one-line signature; the names a file uses
(`Name` ids, attribute names, imported names) are what the repository map links files by. A file that does not
parse still counts as a file, with no definitions: the index describes the repository as it is.
"""
from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass

from agents import python_ast
from agents.repo.terms import terms

DEF_NODES = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
MAX_SIGNATURE_CHARS = 200
# Comments and string literals (any prefix, triple-quoted first) match the first branches and yield "", so only
# identifiers in code are captured.
NAME_OUTSIDE_STRINGS_RE = re.compile(
    r"#[^\n]*"
    r"|[rRbBuUfF]{0,2}(?:'''(?:\\.|[^\\])*?'''" r'|"""(?:\\.|[^\\])*?"""'
    r"|'(?:\\.|[^'\\\n])*'" r'|"(?:\\.|[^"\\\n])*")'
    r"|([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True, slots=True)
class Symbol:
    path: str
    qualname: str  # "Class.method"
    kind: str  # "class", "function", "method"
    line: int
    end_line: int
    signature: str  # one line rebuilt from the tree, e.g. "def filter(self, *args, **kwargs):"
    terms: tuple[str, ...]  # what lexical search matches: split name and path, and the definition's words

    @property
    def name(self) -> str:
        return self.qualname.rpartition(".")[2]

    @property
    def depth(self) -> int:
        return self.qualname.count(".")


def parse_python(path: str, text: str) -> tuple[list[Symbol], Counter[str]] | None:
    """(definitions, names used and how often), or None when the file does not parse (or nests deeper than its
    tree can be walked: a generated file)."""
    symbols: list[Symbol] = []
    try:
        tree = python_ast.parse(text, filename=path)
        _collect(tree, path, text.splitlines(), prefix="", in_class=False, out=symbols)
    except python_ast.NOT_PARSED:
        return None
    return symbols, names_used(text)


def _collect(node: ast.AST, path: str, lines: list[str], prefix: str, in_class: bool, out: list[Symbol]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, DEF_NODES):
            qualname = f"{prefix}{child.name}"
            out.append(_symbol(child, path, lines, qualname, in_class))
            # Functions nested in functions are implementation detail; methods of nested classes are not.
            if isinstance(child, ast.ClassDef):
                _collect(child, path, lines, f"{qualname}.", in_class=True, out=out)
        elif isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):
            # Definitions under `if TYPE_CHECKING:` or `try: ... except ImportError:` are still the module's.
            _collect(child, path, lines, prefix, in_class, out)


def _symbol(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef, path: str, lines: list[str],
            qualname: str, in_class: bool) -> Symbol:
    kind = "class" if isinstance(node, ast.ClassDef) else ("method" if in_class else "function")
    return Symbol(path, qualname, kind, node.lineno, node.end_lineno or node.lineno, signature(node),
                  _terms(node, path, lines, qualname))


def signature(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """One line however the definition is wrapped, so the map never shows half an argument list."""
    if isinstance(node, ast.ClassDef):
        bases = ", ".join(ast.unparse(b) for b in [*node.bases, *node.keywords])
        text = f"class {node.name}({bases}):" if bases else f"class {node.name}:"
    else:
        prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
        returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
        text = f"{prefix} {node.name}({ast.unparse(node.args)}){returns}:"
    return text if len(text) <= MAX_SIGNATURE_CHARS else text[: MAX_SIGNATURE_CHARS - 4] + " ...:"


def _terms(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef, path: str, lines: list[str],
           qualname: str) -> tuple[str, ...]:
    words = terms(qualname) + terms(path.removesuffix(".py"))
    if isinstance(node, ast.ClassDef):
        # A class is found by its name, bases, docstring summary and method names; its methods are documents
        # of their own, so its body's words would only blur which one matches.
        doc = ast.get_docstring(node, clean=False)
        words += terms(doc.split("\n\n", 1)[0]) if doc else []
        words += [t for base in node.bases for t in terms(ast.unparse(base))]
        words += [t for item in node.body if isinstance(item, DEF_NODES) for t in terms(item.name)]
    else:
        # The whole definition as text (arguments, docstring, comments, names used) in one regex pass, where a
        # walk of each function's tree tripled the indexing time.
        words += terms("\n".join(lines[node.lineno - 1: node.end_lineno]))
    return tuple(words)


def names_used(text: str) -> Counter[str]:
    """The identifiers of the source outside strings and comments, with their counts: what `ast.walk` would give
    for names and attributes (plus keywords and the names inside f-strings' braces, which link nothing), in one
    regex pass that is four times faster than walking the tree again."""
    return Counter(match for match in NAME_OUTSIDE_STRINGS_RE.findall(text) if match)
