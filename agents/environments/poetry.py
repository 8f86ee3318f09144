"""Poetry's dependency tables ([tool.poetry.dependencies], a group's dependencies) as PEP 508 requirements, read as
data: Poetry's version syntax translated exactly, its table form's extras, markers, python and platform kept. What
pip cannot take from the operator's package sources (a git, path, url or file dependency, another `source`) is left
out with a note, as a tox deps line that is no plain requirement is."""
from __future__ import annotations

import re
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

# one constraint of a comma- or space-separated list: an operator (Poetry's ^ and ~, PEP 440's) and a version
_PART = re.compile(r"\s*(\^|~=|~|===|==|!=|>=|<=|>|<|=)?\s*([\w.*+!-]+)\s*,?\s*")
_RELEASE = re.compile(r"\d+(?:\.\d+)*")
_ELSEWHERE = ("git", "path", "url", "file")  # not from a package index


def requirements(table: dict[str, Any], where: str, notes: list[str]) -> list[str]:
    """A Poetry dependencies table's requirements, `python` (the interpreter, not a package) and optional ones
    (installed only with one of the project's extras) left out."""
    lines: list[str] = []
    left_out: list[str] = []
    for name, value in table.items():
        if name.lower() == "python":
            continue
        for spec in value if isinstance(value, list) else [value]:  # a list: one table per Python or platform
            spec = {"version": spec} if isinstance(spec, str) else spec
            if isinstance(spec, dict) and spec.get("optional") is True:
                continue
            line, why = _requirement(name, spec) if isinstance(spec, dict) else ("", "neither a version nor a table")
            if line:
                lines.append(line)
            else:
                left_out.append(f"{name} ({why})")
    if left_out:
        notes.append(f"{where} not installed: {', '.join(left_out[:10])}")
    return lines


def _requirement(name: str, spec: dict[str, Any]) -> tuple[str, str]:
    """(the PEP 508 line, "") or ("", why it is left out)."""
    if elsewhere := [key for key in _ELSEWHERE if key in spec]:
        return "", f"a {elsewhere[0]} dependency: packages come only from the operator's sources"
    if "source" in spec:
        return "", f"from its own package source {spec['source']!r}: packages come only from the operator's sources"
    version = specifier(spec.get("version", "*")) if isinstance(spec.get("version", "*"), str) else None
    if version is None:
        return "", f"version {spec.get('version')!r} has no PEP 440 equivalent aiteam translates"
    listed = spec.get("extras")
    extras = [extra for extra in listed if isinstance(extra, str)] if isinstance(listed, list) else []
    python = _python_marker(spec["python"]) if isinstance(spec.get("python"), str) else ""
    if python is None:
        return "", f"python {spec['python']!r} has no marker aiteam translates"
    platform = f'sys_platform == "{spec["platform"]}"' if isinstance(spec.get("platform"), str) else ""
    markers = [marker for marker in (spec.get("markers"), python, platform) if isinstance(marker, str) and marker]
    line = f"{name}{'[' + ','.join(extras) + ']' if extras else ''}{version}"
    line += "; " + " and ".join(f"({marker})" for marker in markers) if markers else ""
    try:
        Requirement(line)
    except InvalidRequirement:
        return "", "not a requirement once translated"
    return line, ""


def specifier(constraint: str) -> str | None:
    """Poetry's version constraint as a PEP 440 specifier ("" for any version): `^1.2.3` → `>=1.2.3,<2.0.0`,
    `^0.2.3` → `>=0.2.3,<0.3.0`, `~1.2` → `>=1.2,<1.3`, `*` any, a bare `1.2.3` → `==1.2.3`, PEP 440 specifiers as
    they are. None for what has no single equivalent (`^1 || ^2`) or does not parse."""
    parts: list[str] = []
    end = 0
    for match in _PART.finditer(constraint):
        if match.start() != end:  # something between two constraints: `||`, a stray character
            return None
        end = match.end()
        operator, version = match.groups()
        if version == "*" and not operator:
            continue
        if operator in ("^", "~"):
            upper = _upper(version, caret=operator == "^")
            if upper is None:
                return None
            parts += [f">={version}", f"<{upper}"]
        else:
            parts.append(f"{'==' if operator in (None, '=') else operator}{version}")
    if not end or end != len(constraint):
        return None
    try:
        SpecifierSet(",".join(parts))
    except InvalidSpecifier:
        return None
    return ",".join(parts)


def _upper(version: str, *, caret: bool) -> str | None:
    """The excluded upper bound: a caret raises the first non-zero part given (the last given when all are zero),
    a tilde the minor version when one is given, else the major."""
    release = _RELEASE.match(version)
    if not release:
        return None
    numbers = [int(part) for part in release.group(0).split(".")]
    if caret:
        index = next((i for i, number in enumerate(numbers) if number), len(numbers) - 1)
    else:
        index = 1 if len(numbers) > 1 else 0
    bound = numbers[:index] + [numbers[index] + 1] + [0] * (len(numbers) - index - 1)
    return ".".join(map(str, bound))


def _python_marker(constraint: str) -> str | None:
    """`python = "^3.8 || ~2.7"` as a marker (python_version for a major.minor bound, python_full_version for a
    finer one, as Poetry writes them); "" for any Python, None for what does not translate."""
    alternatives = []
    for alternative in constraint.split("||"):
        translated = specifier(alternative.strip())
        if translated is None:
            return None
        if not translated:
            return ""
        alternatives.append(" and ".join(_python_clause(part) for part in translated.split(",")))
    return " or ".join(f"({alternative})" for alternative in alternatives) if len(alternatives) > 1 \
        else alternatives[0]


def _python_clause(specifier_part: str) -> str:
    operator, version = re.match(r"([<>=!~]+)(.+)", specifier_part).groups()  # type: ignore[union-attr]
    field = "python_full_version" if len(version.split(".")) > 2 else "python_version"
    return f'{field} {operator} "{version}"'
