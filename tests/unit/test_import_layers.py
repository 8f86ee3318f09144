"""The code's layers point one way (docs/architecture.md): agents/ is a leaf that imports nothing of lifecycle,
no product module takes part in an import cycle, and lifecycle/services and lifecycle/replay (whose runs.py is a
service) import at module level (a function-level import, which hides a cycle, needs a reason on its line). Read
from the source with ast, nothing imported."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("aiteam", "agents", "lifecycle")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


MODULES = modules()


def owner(name: str) -> str | None:
    """The product module an imported name lives in ("lifecycle.services.leases.Lease" → its module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> list[tuple[str, ast.stmt]]:
    """(imported module, statement) for every import of a product module, but those under TYPE_CHECKING."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
               for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped or not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            target = owner(name)
            if target and target != module:
                found.append((target, node))
    return found


GRAPH = {module: {target for target, _ in imports(module)} for module in MODULES}


def test_agents_is_a_leaf_that_imports_nothing_of_lifecycle():
    offenders = sorted(f"{m} → {t}" for m, targets in GRAPH.items() if m.startswith("agents")
                       for t in targets if t.startswith("lifecycle"))
    assert offenders == []


def test_no_product_module_takes_part_in_an_import_cycle():
    assert cycles(GRAPH) == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith(("lifecycle.services", "lifecycle.replay"))))
def test_services_import_at_module_level_or_say_why(module):
    lines = MODULES[module].read_text().splitlines()
    hidden = [node.lineno for _, node in imports(module) if node.col_offset > 0 and "#" not in lines[node.lineno - 1]]
    assert hidden == [], f"{module}: function-level imports without a reason on lines {hidden}"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
