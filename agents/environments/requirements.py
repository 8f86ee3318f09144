"""What a repository's environment is made of: its dependency files (whose bytes key the cached venv) and the
requirements read from them, as data. Nothing of the repository is executed here: setup.py is hashed, not run.

The repository itself is not installed: its tests import the checkout (the runner puts it on the path), so the
code after a change is what they test, and the venv stays valid while only code changes.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from packaging.requirements import InvalidRequirement, Requirement

import agents.environments.poetry as poetry
import agents.environments.pyconfig as pyconfig
from agents.environments.wheels import normalized

KEY_VERSION = "aiteam-env-1"  # bump when what goes into a venv changes, so old ones are not reused
_ROOT_FILES = ("pyproject.toml", "setup.cfg", "setup.py", "Pipfile", "Pipfile.lock", "poetry.lock", "pdm.lock",
               "uv.lock", "tox.ini", "tox.toml")
_ROOT_GLOBS = ("requirements*.txt", "requirements*.in", "*[-_]requirements.txt", "*[-_]requirements.in",
               "constraints*.txt", "requirements/*.txt")
# Extras and dependency groups, by tier: the test-like ones; else `dev`; else `all` (idna's test dependencies,
# hypothesis, are in its `all` extra only)
_GROUP_TIERS = (("test", "tests", "testing"), ("dev",), ("all",))
# What a dev or all group holds for working on the project rather than for its tests: lint, format, typing, docs
# and release tools, by their names as wheels spell them (pytest-cov stays: tests may pass --cov in addopts)
_TOOLS = re.compile(r"ruff|black|flake8(_.+)?|isort|pylint(_.+)?|mypy|types_.+|.+_stubs|pyright|pre_commit"
                    r"|sphinx(_.+)?|sphinxcontrib_.+|sphinxext_.+|furo|myst_parser|mkdocs(_.+)?|twine|build"
                    r"|towncrier|bump.*")
_TOX_SELF = re.compile(r"^(-e\s*|--editable\s+)?(\.|\./|\{(?:toxinidir|tox_root)\}/?)(\[(?P<extras>[\w,\s-]*)\])?$")
# pip options in a requirements file that would send the install to another package source than the operator's
_SOURCE_OPTIONS = re.compile(r"^\s*(-i|--index-url|--extra-index-url|-f|--find-links|--trusted-host)\b")
_SELF = re.compile(r"^\s*(-e\s+|--editable\s+)?(\.|\./)?(\[[\w,\s-]*\])?\s*$")  # "-e .", ".[dev]": the repo itself
_INCLUDE = re.compile(r"^\s*(-r|--requirement|-c|--constraint)\s*=?\s*(\S+)")
_CONSTRAINT_OPTIONS = ("-c", "--constraint")
_TOX_ROOT = ("{toxinidir}/", "{tox_root}/")  # -r{toxinidir}/requirements/test.txt: the root, where paths start
# Requirements files by the words of their names (requirements/, requirements-*.txt, *-requirements.txt): see
# _tests_files
_BASE = re.compile(r"|base|main|prod|production")
_TESTS = re.compile(r"(?<![a-z])test")
_DEV = re.compile(r"(?<![a-z])dev")
_FOR_OTHERS = re.compile(r"(?<![a-z])(docs?|typing|types|mypy|lint|build|style|release)(?![a-z])")
_PYTHON_VERSION = re.compile(r"(?:^|[-_.]|(?<=[a-z]))(?:py|python)?([23](?:[._]?\d{1,2})?)$")


class Dependencies(NamedTuple):
    requirements: list[str]  # installed
    constraints: list[str]  # given to pip with -c: they pin what something else asks for, never install
    notes: list[str]  # for a human


class BadDependencies(ValueError):
    """A dependency file aiteam will not install from (another package source, a file outside the checkout)."""


def dependency_files(root: Path) -> list[str]:
    """The dependency files of the checkout's root, relative and sorted (links out of it are not followed)."""
    found = {name for name in _ROOT_FILES if _regular(root / name)}
    for pattern in _ROOT_GLOBS:
        found |= {path.relative_to(root).as_posix() for path in root.glob(pattern) if _regular(path)}
    return sorted(found)


def environment_key(root: Path, files: list[str], extra: tuple[str, ...] = (), requirements: tuple[str, ...] = (),
                    constraints: tuple[str, ...] = ()) -> str:
    """sha256 of the dependency files' names and bytes, the interpreter, `extra` (the runner's own needs) and the
    requirements and constraints collected from them (what `-r` and `-c` includes brought in, which the files' own
    bytes do not show: two repositories whose requirements.txt only includes differing files must not share a
    venv)."""
    digest = hashlib.sha256()
    interpreter = [KEY_VERSION, platform.python_implementation(), platform.machine(), *map(str, sys.version_info[:3])]
    # "constraints:" is no requirement, so it cannot be confused with one; left out when there are none, so the
    # keys of venvs built without constraints stay what they were
    pinned = ["constraints:", *constraints] if constraints else []
    for part in [*interpreter, *extra, "requirements:", *requirements, *pinned]:
        digest.update(part.encode() + b"\0")
    for name in files:
        digest.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    return digest.hexdigest()


def collect_requirements(root: Path, files: list[str]) -> Dependencies:
    """What one pip install is given: the tests' requirements files (`_tests_files`; their -r includes inlined, the
    repository itself left out), pyproject.toml's and setup.cfg's dependencies with their test and dev extras (else
    their `all` extra), the extras and deps of tox's base run environment, poetry.lock's and Pipfile.lock's pins; and
    apart, the constraints: a file whose name says it is one (constraints.txt, requirements/constraints-dev.txt) and
    whatever a `-c` names, in a requirements file or tox's deps. A constraint pins a package something else asks
    for: installing its lines would bring in packages the project never asked for."""
    lines: list[str] = []
    pins: list[str] = []
    notes: list[str] = []
    tox = _tox(root, notes)
    for name in _tests_files(files, named_by_tox=tox.named, notes=notes):
        wanted, pinned = _requirements_file(root, root / name, seen=set(),
                                            constraint="constraint" in Path(name).name.lower())
        lines, pins = lines + wanted, pins + pinned
    lines += _pyproject(root, tox.extras, notes) + _setup_cfg(root, tox.extras, notes) + tox.lines \
        + _poetry_lock(root, notes) + _pipfile_lock(root, notes)
    lines = [checked for line in lines if (checked := _requirement(line))]
    pins = [_without_extras(checked) for line in pins + tox.pins if (checked := _requirement(line))]
    if "setup.py" in files and not any(f in files for f in ("pyproject.toml", "setup.cfg")):
        notes.append("setup.py is not run to learn its install_requires: list the test dependencies in a "
                     "requirements file")
    return Dependencies(list(dict.fromkeys(lines)), list(dict.fromkeys(pins)), notes)


def _tests_files(files: list[str], *, named_by_tox: tuple[str, ...], notes: list[str]) -> list[str]:
    """The requirements files installed as they are (constraints files always are, as pins): none when tox's
    base environment names its own with -r (those are what its tests run with, inlined by _tox), else the plain
    ones (requirements.txt, requirements/base.txt, main, prod) and the test-like ones (test, tests, testing),
    else the dev ones when none is test-like; never those for another Python version (tests37.txt) nor docs,
    typing or lint locks (a pip-compile folder's files pin the same packages differently: installed together
    they conflict)."""
    requirement_files = [name for name in files if name.endswith((".txt", ".in"))]
    constraints = [name for name in requirement_files if "constraint" in Path(name).name.lower()]
    candidates = [name for name in requirement_files if name not in constraints]
    if named_by_tox:
        chosen = []
    else:
        usable = [name for name in candidates if not _other_python(name) and not _FOR_OTHERS.search(_words(name))]
        chosen = [name for name in usable if _BASE.fullmatch(_words(name)) or _TESTS.search(_words(name))]
        if not any(_TESTS.search(_words(name)) for name in chosen):
            chosen += [name for name in usable if _DEV.search(_words(name))]
    if left_out := [name for name in candidates if name not in chosen and name not in named_by_tox]:
        why = "tox's [testenv] deps name the files its tests use" if named_by_tox else \
            "not the tests' (docs, typing, lint, another Python version)"
        notes.append(f"requirements files not installed ({why}): {', '.join(left_out[:10])}")
    return constraints + chosen


def _words(name: str) -> str:
    """A requirements file's name as its words: requirements/requirements-tests.txt, test_requirements.txt →
    "tests", "test"."""
    stem = Path(name).stem.lower()
    return re.sub(r"^requirements?(?:[-_.]|$)|[-_]requirements?$", "", stem)


def _other_python(name: str) -> bool:
    """tests37.txt, test-py3.8.txt: for another Python version than the worker's."""
    version = _PYTHON_VERSION.search(_words(name))
    if not version:
        return False
    digits = version.group(1).replace(".", "").replace("_", "")
    wanted = (int(digits[0]), int(digits[1:])) if len(digits) > 1 else (int(digits),)
    return tuple(sys.version_info[:len(wanted)]) != wanted


def _requirement(line: str) -> str:
    """A requirement pip may install: a name, extras, a version and markers, nothing else (an allow-list, not a
    list of options to refuse). A pip option (`--no-binary`, a shortened `--find`), a path, a direct URL or a VCS
    source would let the repository choose what runs at install time or where packages come from. Hash options
    are dropped (the pins stand without them); "" for what is left of a hash-only continuation line."""
    text = re.sub(r"\s+--hash[= ]\S+", "", line).removesuffix("\\").strip()
    if not text or text.startswith("--hash"):
        return ""
    if len(text.splitlines()) > 1:  # \f, \x85, U+2028 end a line too: one line read as two requirements
        raise BadDependencies(f"{line.strip()[:200]!r} holds a line break: one requirement a line")
    if text.startswith("-"):
        raise BadDependencies(f"{line.strip()[:200]!r} is a pip option, not a requirement: only names, versions and "
                              "markers are installed")
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        kind = "a direct URL or VCS source" if ("://" in text or "+" in text.split("/")[0]) else "not a requirement"
        raise BadDependencies(f"{text[:200]!r} is {kind} aiteam installs (names, versions and markers only): "
                              f"{exc}") from None
    if requirement.url:
        raise BadDependencies(f"{text[:200]!r} names a direct URL or VCS source: packages come only from the "
                              "sources the operator configured")
    return text


def _without_extras(line: str) -> str:
    """A constraint as pip takes one: pip refuses a constraint with extras (`pkg[x]==1`, as pip-compile wrote them
    before --strip-extras), while the pin is what counts."""
    requirement = Requirement(line)
    if not requirement.extras:
        return line
    requirement.extras = set()
    return str(requirement)


def _requirements_file(root: Path, path: Path, *, seen: set[tuple[Path, bool]], constraint: bool = False,
                       by: str = "") -> tuple[list[str], list[str]]:
    """(requirements, constraints) of a requirements file: its -r includes inlined as what it is, its -c includes
    as constraints, and all a constraints file includes as constraints (pip would install the -r of a constraints
    file; a file that pins does not ask for packages here). by: what names the file (another file, tox's deps)."""
    shown = _shown(root, path)
    if not Path(os.path.normpath(path)).is_relative_to(os.path.normpath(root)):
        raise BadDependencies(f"{by + ' names ' if by else ''}{shown}, outside the repository")
    resolved = path.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise BadDependencies(f"{by + ' names ' if by else ''}{shown}, a link pointing outside the repository")
    if (resolved, constraint) in seen:
        return [], []
    seen.add((resolved, constraint))
    text = pyconfig.read_text(path)
    if text is None:
        raise BadDependencies(f"{shown} is not a readable file of the repository")
    lines: list[str] = []
    pins: list[str] = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or _SELF.match(line):
            continue
        if _SOURCE_OPTIONS.match(line):
            raise BadDependencies(f"{shown} names its own package source ({line.split()[0]}): "
                                  "packages come only from the sources the operator configured")
        if include := _INCLUDE.match(line):
            wanted, pinned = _requirements_file(root, path.parent / include.group(2), seen=seen, by=shown,
                                                constraint=constraint or include.group(1) in _CONSTRAINT_OPTIONS)
            lines, pins = lines + wanted, pins + pinned
        elif line.startswith(("-e", "--editable", ".", "/", "file:")):
            raise BadDependencies(f"{shown}: {line!r} installs from a local path, which aiteam "
                                  "does not support yet (the repository itself, '.', is skipped)")
        else:
            (pins if constraint else lines).append(line)
    return lines, pins


def _pyproject(root: Path, extras: tuple[str, ...], notes: list[str]) -> list[str]:
    """[project] dependencies (else Poetry's [tool.poetry.dependencies]), the test-like extras and dependency groups
    (PEP 735's, PDM's and Poetry's; else `dev`, else `all`; see _chosen), and the extras tox names.
    An extra that names the project itself (`all = ["pkg[a,b]"]`) brings in those extras, not the published
    package."""
    data = pyconfig.read_toml(root / "pyproject.toml") or {}
    project, tool = _table(data, "project"), _table(data, "tool")
    optional = _table(project, "optional-dependencies")
    groups = _table(data, "dependency-groups")
    own = project.get("name") if isinstance(project.get("name"), str) else ""
    if "dependencies" in project:
        lines = _strings(project.get("dependencies"))
    else:  # a Poetry project without [project] dependencies, or with them dynamic
        lines = poetry.requirements(_table(_table(tool, "poetry"), "dependencies"), "[tool.poetry.dependencies]",
                                    notes)
    for name in _chosen(optional.keys() | groups.keys() | _tool_group_names(tool), extras):
        group = _own_extras(_strings(optional.get(name)), optional, own) + _group(groups, name, seen=set()) \
            + _tool_group(tool, name, notes)
        lines += _for_tests(name, group, extras, notes)
    return lines


def _tool_group_names(tool: dict[str, Any]) -> set[str]:
    poetry_table = _table(tool, "poetry")
    return {*_table(_table(tool, "pdm"), "dev-dependencies"), *_table(poetry_table, "group"),
            *(["dev"] if "dev-dependencies" in poetry_table else [])}


def _tool_group(tool: dict[str, Any], name: str, notes: list[str]) -> list[str]:
    """A dependency group of PDM's [tool.pdm.dev-dependencies] (PEP 508 lines; its `-e` ones, local paths, left out
    with a note) and of Poetry's [tool.poetry.group.<name>.dependencies] (legacy [tool.poetry.dev-dependencies] for
    `dev`), Poetry's tables translated by poetry.requirements."""
    pdm = _strings(_table(_table(tool, "pdm"), "dev-dependencies").get(name))
    if editable := [line for line in pdm if line.startswith("-e")]:
        notes.append(f"[tool.pdm.dev-dependencies] {name} not installed (a local path): {', '.join(editable[:10])}")
    poetry_table = _table(tool, "poetry")
    tables = {f"[tool.poetry.group.{name}.dependencies]": _table(_table(_table(poetry_table, "group"), name),
                                                                  "dependencies")}
    if name == "dev":
        tables["[tool.poetry.dev-dependencies]"] = _table(poetry_table, "dev-dependencies")
    return [line for line in pdm if not line.startswith("-e")] \
        + [line for where, table in tables.items() for line in poetry.requirements(table, where, notes)]


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _chosen(present: Iterable[str], named: tuple[str, ...]) -> list[str]:
    """The groups to install: those of the first tier present (the test-like ones, else `dev`, else `all`), and
    those tox names."""
    present = set(present)
    usual = next(([name for name in tier if name in present] for tier in _GROUP_TIERS
                  if any(name in present for name in tier)), [])
    return list(dict.fromkeys([*usual, *(name for name in named if name in present)]))


def _for_tests(name: str, lines: list[str], named: tuple[str, ...], notes: list[str]) -> list[str]:
    """A chosen group's requirements without the lint, typing, docs and release tools (_TOOLS) when it is a dev
    or all group read for want of a test-like one: it is made for working on the project (tomlkit's dev group
    holds pre-commit, mypy, Sphinx<5 and furo beside pytest). A test-like group, or one tox names, stays whole."""
    if name in _GROUP_TIERS[0] or name in named:
        return lines
    kept = [line for line in lines if not _TOOLS.fullmatch(_name(line))]
    if left_out := [line for line in lines if line not in kept]:
        notes.append(f"left out of the {name} group (lint, typing, docs and release tools, not the tests'): "
                     f"{', '.join(left_out[:10])}")
    return kept


def _name(line: str) -> str:
    """A requirement's normalized name; "" for what is not one (refused with its reason by _requirement)."""
    try:
        return normalized(Requirement(line).name)
    except InvalidRequirement:
        return ""


def _own_extras(lines: list[str], optional: dict[str, Any], own: str, depth: int = 0) -> list[str]:
    expanded = []
    for line in lines:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            expanded.append(line)  # refused with its reason by _requirement
            continue
        if own and normalized(requirement.name) == normalized(own):
            if depth < 3:
                for extra in sorted(requirement.extras):
                    expanded += _own_extras(_strings(optional.get(extra)), optional, own, depth + 1)
        else:
            expanded.append(line)
    return expanded


def _group(groups: dict[str, Any], name: str, *, seen: set[str]) -> list[str]:
    """A dependency group (PEP 735), its `{include-group = ...}` tables inlined."""
    if name in seen:
        return []
    seen.add(name)
    lines = []
    items = groups.get(name)
    for item in items if isinstance(items, list) else []:  # PEP 735's groups are lists; anything else is none
        if isinstance(item, str):
            lines.append(item)
        elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
            lines += _group(groups, item["include-group"], seen=seen)
    return lines


def _setup_cfg(root: Path, extras: tuple[str, ...], notes: list[str]) -> list[str]:
    parser = pyconfig.read_ini(root / "setup.cfg")
    if parser is None:
        return []
    lines = _ini_list(parser.get("options", "install_requires", fallback=""))
    present = parser.options("options.extras_require") if parser.has_section("options.extras_require") else []
    for name in _chosen(present, extras):
        lines += _for_tests(name, _ini_list(parser.get("options.extras_require", name, fallback="")), extras, notes)
    return lines


class _Tox(NamedTuple):
    lines: list[str]
    pins: list[str]
    extras: tuple[str, ...]
    named: tuple[str, ...]  # the requirements files of the repository its deps name with -r


def _tox(root: Path, notes: list[str]) -> _Tox:
    """(requirement lines, constraint lines, the project's extras, whether -r names files) of tox's base run
    environment (tox.ini's
    [testenv], pyproject.toml's [tool.tox], tox.toml's [env_run_base]): its `deps` (what the tests need beyond the
    project, pytest-cov or hypothesis say; `-r` files inlined, `-c` files as constraints) and its `extras` and
    `.[extra]` deps, read from the project's own metadata. Lines for other environments (`py311: pkg`, see
    _for_default_run), with tox substitutions aiteam cannot know, or that are not a plain requirement are left out,
    said in the notes: the tox line is not the repository's only word on its dependencies, so it does not refuse the
    repository."""
    lines: list[str] = []
    pins: list[str] = []
    named: list[str] = []
    _, listed = pyconfig.tox_run_base(root, "extras")
    extras = [extra for line in listed for extra in re.split(r"[,\s]+", line) if extra]
    skipped: list[str] = []
    where, deps = pyconfig.tox_run_base(root, "deps")
    for raw in deps:
        written = raw.split(" #", 1)[0].strip()
        if not written or written.startswith("#"):
            continue
        line = _for_default_run(written)
        own = _TOX_SELF.match(line)
        include = _INCLUDE.match(_from_tox_root(line))  # -r{toxinidir}/requirements/test.txt
        if not line:
            skipped.append(written)
        elif own:
            extras += [extra.strip() for extra in (own.group("extras") or "").split(",") if extra.strip()]
        elif include:
            try:
                wanted, pinned = _requirements_file(root, root / include.group(2), seen=set(), by=f"{where} deps",
                                                    constraint=include.group(1) in _CONSTRAINT_OPTIONS)
            except BadDependencies as exc:
                skipped.append(f"{written} ({exc})")
            else:
                lines, pins = lines + wanted, pins + pinned
                named += [_shown(root, root / include.group(2))] if include.group(1) not in _CONSTRAINT_OPTIONS else []
        elif "{" in line or not _plain(line):
            skipped.append(written)
        else:
            lines.append(line)
    if skipped:
        notes.append(f"{where} deps not installed (another environment's, a tox substitution, or not a "
                     f"plain requirement): {', '.join(skipped[:10])}")
    return _Tox(lines, pins, tuple(dict.fromkeys(extras)), tuple(named))


def _for_default_run(line: str) -> str:
    """A tox deps line without its factor condition when the condition holds for the run aiteam makes, else "".
    That run is tox's environment with no factors (aiteam picks none of the envlist's: the worker's Python, the
    versions the requirements resolve to), so by tox's rules `a: pkg` is another environment's, `!a: pkg` is this
    one's, `!a-!b:` (not a and not b) is, and `a,!b:` (a or not b) is."""
    condition = pyconfig.TOX_FACTOR.match(line)
    if not condition:
        return line
    alternatives = condition.group(0).strip().removesuffix(":").split(",")
    applies = any(all(factor.startswith("!") for factor in alternative.split("-")) for alternative in alternatives)
    return line[condition.end():].strip() if applies else ""


def _shown(root: Path, path: Path) -> str:
    """path as a person reads it: relative to the root when it is under it (as written, links not followed)."""
    normal = Path(os.path.normpath(path))
    return normal.relative_to(os.path.normpath(root)).as_posix() if normal.is_relative_to(os.path.normpath(root)) \
        else str(normal)


def _from_tox_root(line: str) -> str:
    for prefix in _TOX_ROOT:
        line = line.replace(prefix, "")
    return line


def _plain(line: str) -> bool:
    try:
        _requirement(line)
    except BadDependencies:
        return False
    return True


def _poetry_lock(root: Path, notes: list[str]) -> list[str]:
    packages = (pyconfig.read_toml(root / "poetry.lock") or {}).get("package", [])
    if not isinstance(packages, list):
        notes.append("poetry.lock not read: its `package` is not a list of tables, as Poetry writes it")
        return []
    return [f"{p['name']}=={p['version']}" for p in packages
            if isinstance(p, dict) and isinstance(p.get("name"), str) and isinstance(p.get("version"), str)]


def _pipfile_lock(root: Path, notes: list[str]) -> list[str]:
    try:
        data = json.loads(pyconfig.read_text(root / "Pipfile.lock") or "{}")
    except json.JSONDecodeError as exc:
        notes.append(f"Pipfile.lock not read: it is not JSON ({exc})")
        return []
    sections = [data.get(section) or {} for section in ("default", "develop")] if isinstance(data, dict) else [data]
    if not all(isinstance(section, dict) for section in sections):
        notes.append("Pipfile.lock not read: it is not an object whose default and develop sections are objects "
                     "(package name: its pin), as pipenv writes it")
        return []
    return [f"{name}{spec['version']}" for section in sections for name, spec in section.items()
            if isinstance(spec, dict) and isinstance(spec.get("version"), str)]


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _ini_list(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip() and not line.strip().startswith("#")]


def _regular(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()
