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

import ast
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from agents import python_ast
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
        """`path::name` of every module-level test function of the hidden modules."""
        return [f"{path}::{node.name}" for path, text in self.hidden.items() for node in python_ast.parse(text).body
                if isinstance(node, ast.FunctionDef) and node.name.startswith("test")]


def suite_folder(name: str) -> Path:
    folder = Path(name) if "/" in name else Path(settings.BASE_DIR) / "evals" / name
    if not folder.is_dir():
        raise SuiteError(f"no suite {name}: give the name of a folder under evals/ (or a path to one)")
    return folder


def suite_name(name: str) -> str:
    """How a run's suite is named to people: its folder's name, not the path an operator gave (`--suite /home/…`)."""
    return Path(name).name or name


def load_suite(name: str) -> list[Case]:
    """The suite's cases, in their folders' order."""
    cases = [load_case(path.parent) for path in sorted(suite_folder(name).glob("*/case.toml"))]
    if not cases:
        raise SuiteError(f"suite {name} has no case: each case is a folder holding a case.toml")
    return cases


def load_case(folder: Path) -> Case:
    path = folder / "case.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        kind = data["kind"]
        if kind not in KINDS:
            raise SuiteError(f"{path}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
        body = (folder / data["body"]).read_text(encoding="utf-8").strip()
        if kind == "brief":  # a brief file's '# Title' line is not the brief (aiteam_demo reads it so too)
            body = brief_from_text(body)[1]
        return Case(name=folder.name, kind=kind, title=data["title"], body=body,
                    cassette=(folder / data["cassette"]).resolve(), hidden=_hidden(folder, data.get("hidden")),
                    repository=_repository(folder, data.get("repository"), kind, path))
    except (KeyError, tomllib.TOMLDecodeError, OSError) as exc:
        raise SuiteError(f"{path}: {type(exc).__name__}: {exc}") from None


def _hidden(folder: Path, name: str | None) -> dict[str, str]:
    if not name:
        return {}
    root = folder / name
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.py"))}


def _repository(folder: Path, data: dict | None, kind: str, path: Path) -> Repository | None:
    if kind == "brief":
        return None
    if not data:
        raise SuiteError(f"{path}: a ticket case names its [repository] builder")
    return Repository(builder=(folder / data["builder"]).resolve(), args=tuple(data.get("args", ())),
                      base=data.get("base", "main"))
