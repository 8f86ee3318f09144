"""The suite format: a folder under evals/, one folder per case holding case.toml (docs/evals.md).

    kind = "ticket"                  # or "brief"
    title = "slugify leaves double dashes"
    body = "body.md"                 # the ticket's body, or the brief (a first line '# Title' is left out)
    cassette = "cassette.json"       # the model's answers for offline runs
    hidden = "hidden"                # test modules laid over the delivered branch (optional)
    [repository]                     # a ticket's: python BUILDER TARGET WHEELS ARGS... writes it
    builder = "../make_repo.py"
    args = ["textkit-slug-dashes"]
    base = "main"

Paths are relative to the case's folder."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from agents import python_ast
from agents.sandbox.expected import module_tests
from lifecycle.management.commands.aiteam_demo import brief_from_text

KINDS = ("brief", "ticket")


class SuiteError(ValueError):
    """A suite or case that cannot be read: the message names the file and what to fix."""


@dataclass(frozen=True)
class Repository:
    builder: Path
    args: tuple[str, ...] = ()
    base: str = "main"

    def build(self, target: Path, wheels: Path) -> Path:
        """The repository with its history at target, and the wheels it installs in `wheels`."""
        wheels.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, str(self.builder), str(target), str(wheels), *self.args],
                              cwd=settings.BASE_DIR, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise SuiteError(f"{self.builder} failed: {done.stderr.strip()[-500:]}")
        return target


@dataclass(frozen=True)
class Case:
    name: str
    kind: str
    title: str
    body: str
    cassette: Path
    hidden: dict[str, str] = field(default_factory=dict)  # path in the repository → test module
    repository: Repository | None = None

    @property
    def hidden_ids(self) -> list[str]:
        """pytest's ids without parameters (`path::name`, `path::Class::name`) of the tests the hidden modules
        define, read as the sandbox reads a project's expected tests (agents.sandbox.expected)."""
        return [test for path, text in self.hidden.items() for test in module_tests(path, text.encode())]


def suite_folder(name: str) -> Path:
    folder = Path(name) if "/" in name else Path(settings.BASE_DIR) / "evals" / name
    if not folder.is_dir():
        raise SuiteError(f"no suite {name}: give the name of a folder under evals/ (or a path to one)")
    return folder


def suite_name(name: str) -> str:
    """How a run's suite is named to people: its folder's name, not the path an operator gave (`--suite /home/…`)."""
    return Path(name).name or name


def suite_id(name: str) -> str:
    """A suite as runs record it, whatever the operator typed: the folder's name when it is a folder under evals/
    (`offline`, `evals/offline` and `./evals/offline/` are one suite), otherwise its resolved path."""
    folder = suite_folder(name).resolve()
    return folder.name if folder.parent == (Path(settings.BASE_DIR) / "evals").resolve() else str(folder)


def load_suite(name: str) -> list[Case]:
    """The suite's cases, in their folders' order."""
    cases = [load_case(path.parent) for path in sorted(suite_folder(name).glob("*/case.toml"))]
    if not cases:
        raise SuiteError(f"suite {name} has no case: each case is a folder holding a case.toml")
    return cases


def load_case(folder: Path) -> Case:
    path = folder / "case.toml"
    try:
        data = tomllib.loads(_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{path}: TOMLDecodeError: {exc}") from None
    kind = _field(data, "kind", str, path)
    if kind not in KINDS:
        raise SuiteError(f"{path}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    body = _text(folder / _field(data, "body", str, path)).strip()
    if kind == "brief":  # a brief file's '# Title' line is not the brief (aiteam_demo reads it so too)
        body = brief_from_text(body)[1]
    return Case(name=folder.name, kind=kind, title=_field(data, "title", str, path), body=body,
                cassette=(folder / _field(data, "cassette", str, path)).resolve(),
                hidden=_hidden(folder, _field(data, "hidden", str, path, "")),
                repository=_repository(folder, _field(data, "repository", dict, path, {}), kind, path))


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: {type(exc).__name__}: {exc}") from None


def _field(data: dict, name: str, kind: type, path: Path, default: Any = None) -> Any:
    """A case.toml value of the type the format gives it (docs/evals.md); None for a default: it is required."""
    if name not in data and default is not None:
        return default
    if name not in data:
        raise SuiteError(f"{path}: {name} is required")
    value = data[name]
    if not isinstance(value, kind) or (kind is list and not all(isinstance(item, str) for item in value)):
        what = {str: "a string", dict: "a table", list: "a list of strings"}[kind]
        raise SuiteError(f"{path}: {name} must be {what}, not {value!r}")
    return value


def _hidden(folder: Path, name: str) -> dict[str, str]:
    """The hidden modules, each parsed here: one that does not parse is the suite's mistake, found before any run."""
    if not name:
        return {}
    root = folder / name
    modules = {str(p.relative_to(root)): _text(p) for p in sorted(root.rglob("*.py"))}
    for module, text in modules.items():
        try:
            python_ast.parse(text, filename=str(root / module))
        except SyntaxError as exc:
            raise SuiteError(f"{root / module}:{exc.lineno}: the hidden module does not parse: {exc.msg}") from None
    return modules


def _repository(folder: Path, data: dict, kind: str, path: Path) -> Repository | None:
    if kind == "brief":
        return None
    if not data:
        raise SuiteError(f"{path}: a ticket case names its [repository] builder")
    where = Path(f"{path} [repository]")
    return Repository(builder=(folder / _field(data, "builder", str, where)).resolve(),
                      args=tuple(_field(data, "args", list, where, [])), base=_field(data, "base", str, where, "main"))
