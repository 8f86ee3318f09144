"""The repository's own configuration files, read as data (never executed): pytest's settings, tox's commands,
a Makefile's ``test`` recipe, manage.py's settings module, and aiteam's own ``.aiteam.toml``.

Every reader returns None (or empty) for a file that is missing or does not parse: detection then moves on to
the next clue, as pytest itself would not find a broken section either.
"""
from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AITEAM_FILE = ".aiteam.toml"
# Where pytest looks for its configuration in the root, in its own order of precedence (the TOML files first,
# pyproject.toml between the dedicated INI files and tox.ini).
_TOML_FILES = ("pytest.toml", ".pytest.toml")
_INI_SECTIONS = (("pytest.ini", "pytest"), (".pytest.ini", "pytest"), ("tox.ini", "pytest"),
                 ("setup.cfg", "tool:pytest"))
_TEST_WORD = re.compile(r"""["']test["']""")  # Django's test command, as a script hands it on
_SETTINGS_MODULE = re.compile(r"""DJANGO_SETTINGS_MODULE['"]\s*,\s*['"]([\w.]+)['"]""")
TOX_FACTOR = re.compile(r"^!?[\w.]+(?:[-,]!?[\w.]+)*:\s")  # "py311: pkg", "!pypy,django42: pkg": some environments'
_TOX_REFERENCE = re.compile(r"\{\[([^\]]+)\]([\w-]+)\}")  # {[base]deps}: another section's setting
_MAX_BYTES = 1024**2  # a configuration file larger than this is not one a human wrote


@dataclass(frozen=True)
class PytestConfig:
    source: str  # "pytest.ini", "pyproject.toml [tool.pytest.ini_options]", ...
    testpaths: tuple[str, ...]
    pythonpath: tuple[str, ...]
    addopts: tuple[str, ...] = ()  # as pytest reads them (shell words)


def read_text(path: Path) -> str | None:
    """A regular file of the checkout (not a link out of it), as text; None otherwise."""
    if path.is_symlink() or not path.is_file() or path.stat().st_size > _MAX_BYTES:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def read_toml(path: Path) -> dict[str, Any] | None:
    text = read_text(path)
    try:
        return tomllib.loads(text) if text is not None else None
    except tomllib.TOMLDecodeError:
        return None


def read_ini(path: Path) -> configparser.ConfigParser | None:
    text = read_text(path)
    return _parse_ini(text) if text is not None else None


def _parse_ini(text: str) -> configparser.ConfigParser | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser


def pytest_config(root: Path) -> PytestConfig | None:
    """pytest's settings where pytest (9) would take them from: pytest.toml or .pytest.toml's [pytest] (the file
    even without it), pytest.ini or .pytest.ini (even empty), then pyproject.toml's native [tool.pytest] table or
    its [tool.pytest.ini_options], then tox.ini's [pytest], then setup.cfg's [tool:pytest]."""
    for name in _TOML_FILES:
        if (data := read_toml(root / name)) is not None:
            return _from_table(name, _table(data, "pytest"))
    for name, section in _INI_SECTIONS[:2]:
        if (parser := read_ini(root / name)) is not None:
            return _from_ini(name, parser, section)
    tool = _table(_table(read_toml(root / "pyproject.toml") or {}, "tool"), "pytest")
    native = {key: value for key, value in tool.items() if key != "ini_options"}
    if native:  # pytest refuses a pyproject.toml with both tables: the native one is what it documents
        return _from_table("pyproject.toml [tool.pytest]", native)
    if isinstance(tool.get("ini_options"), dict):
        return _from_table("pyproject.toml [tool.pytest.ini_options]", tool["ini_options"])
    for name, section in _INI_SECTIONS[2:]:
        parser = read_ini(root / name)
        if parser is not None and parser.has_section(section):
            return _from_ini(f"{name} [{section}]", parser, section)
    return None


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _from_table(source: str, options: dict[str, Any]) -> PytestConfig:
    return PytestConfig(source, _listed(options.get("testpaths")), _listed(options.get("pythonpath")),
                        _words(options.get("addopts")))


def _from_ini(source: str, parser: configparser.ConfigParser, section: str) -> PytestConfig:
    values = parser[section] if parser.has_section(section) else {}
    return PytestConfig(source, _listed(values.get("testpaths")), _listed(values.get("pythonpath")),
                        _words(values.get("addopts")))


def _listed(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list):
        return tuple(str(item) for item in value)
    return ()


def _words(value: Any) -> tuple[str, ...]:
    """addopts: a string pytest splits as a shell would, or a list of words (pyproject.toml)."""
    if isinstance(value, list):
        return tuple(str(item) for item in value)
    if not isinstance(value, str):
        return ()
    try:
        return tuple(shlex.split(value))
    except ValueError:
        return tuple(value.split())


def tox_commands(root: Path) -> list[str]:
    """The commands of tox.ini's [testenv] (the default environment's), one per line, continuations joined."""
    return tox_setting(root, "commands")


def tox_setting(root: Path, key: str) -> list[str]:
    """A multi-line setting of tox.ini's [testenv] (commands, deps, extras), one entry per line, continuations
    joined and `{[section]key}` references to another section's setting inlined (one level, as written)."""
    return _testenv_setting(read_ini(root / "tox.ini"), key)


def tox_run_base(root: Path, key: str) -> tuple[str, list[str]]:
    """(where, entries) of a setting of tox's base run environment (deps, extras), from the file tox itself takes
    its configuration from: tox.ini's [testenv]; else pyproject.toml's [tool.tox], its native `env_run_base` table
    or its `legacy_tox_ini` text read as tox.ini; else tox.toml's `env_run_base`. ("", []) without any."""
    if os.path.lexists(root / "tox.ini"):  # tox takes tox.ini when it is there, whatever it holds
        return "tox.ini [testenv]", tox_setting(root, key)
    tool = _table(read_toml(root / "pyproject.toml") or {}, "tool").get("tox")  # a `tool` that is no table: none
    if isinstance(tool, dict):
        if "env_run_base" not in tool and isinstance(tool.get("legacy_tox_ini"), str):
            return ("pyproject.toml [tool.tox] legacy_tox_ini [testenv]",
                    _testenv_setting(_parse_ini(tool["legacy_tox_ini"]), key))
        return "pyproject.toml [tool.tox.env_run_base]", _toml_entries(tool, key)
    table = read_toml(root / "tox.toml")
    return ("tox.toml [env_run_base]", _toml_entries(table, key)) if table is not None else ("", [])


def _testenv_setting(parser: configparser.ConfigParser | None, key: str) -> list[str]:
    if parser is None or not parser.has_section("testenv"):
        return []
    lines = []
    for line in _lines(parser["testenv"].get(key, "")):
        reference = _TOX_REFERENCE.fullmatch(line)
        if reference and parser.has_section(reference.group(1)):
            lines += _lines(parser[reference.group(1)].get(reference.group(2), ""))
        else:
            lines.append(line)
    return lines


def _toml_entries(config: dict[str, Any], key: str) -> list[str]:
    """`env_run_base`'s list under key, one entry per item. An item that is a table (`{replace = "ref", ...}`)
    comes out as its JSON, braces and all, for the reader to leave out as a substitution it cannot know."""
    base = config.get("env_run_base")
    value = base.get(key) if isinstance(base, dict) else None
    if isinstance(value, str):
        return _lines(value)
    if not isinstance(value, list):
        return []
    return [item.strip() if isinstance(item, str) else json.dumps(item, default=str) for item in value
            if not isinstance(item, str) or item.strip()]


def _lines(raw: str) -> list[str]:
    return [line.strip() for line in raw.replace("\\\n", " ").splitlines() if line.strip()]


def makefile_recipe(root: Path, target: str = "test") -> list[str]:
    """The recipe lines of the Makefile's `target` rule (tab-indented lines after `target:`)."""
    text = read_text(root / "Makefile") or read_text(root / "makefile") or ""
    lines = text.splitlines()
    rule = re.compile(rf"^{re.escape(target)}\s*:(?!=)")
    for index, line in enumerate(lines):
        if rule.match(line):
            recipe = []
            for follow in lines[index + 1:]:
                if not follow.startswith("\t"):
                    break
                recipe.append(follow.strip())
            return recipe
    return []


def django_settings_module(root: Path) -> str | None:
    """What manage.py sets DJANGO_SETTINGS_MODULE to (``os.environ.setdefault(...)``), read, not run."""
    match = _SETTINGS_MODULE.search(read_text(root / "manage.py") or "")
    return match.group(1) if match else None


def django_test_script(path: Path) -> str | None:
    """The settings module of a test script of Django's usual shape (django-filter's runtests.py): it sets
    DJANGO_SETTINGS_MODULE and hands "test" and its own arguments to execute_from_command_line, as `django-admin test
    --settings=...` would. None for any other script (settings configured in code, a runner of its own)."""
    text = read_text(path) or ""
    match = _SETTINGS_MODULE.search(text)
    hands_test = "execute_from_command_line(" in text and _TEST_WORD.search(text) is not None
    return match.group(1) if match and hands_test and "settings.configure(" not in text else None


def aiteam_command(root: Path) -> str | None:
    """``[tests] command`` of the repository's .aiteam.toml. A file that is there but wrong is an error, not a
    silent fallback: whoever wrote it meant something."""
    path = root / AITEAM_FILE
    if not path.exists():
        return None
    command = _table(read_toml(path) or {}, "tests").get("command")  # `tests = "pytest"` is no table: refused
    if not isinstance(command, str) or not command.strip():
        raise ValueError(f"{AITEAM_FILE} must be TOML with a [tests] table whose command is a non-empty string, "
                         'e.g.\n[tests]\ncommand = "pytest tests"')
    return command
