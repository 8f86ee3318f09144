"""How big a change is and what it touches, read from its unified diff: the scope guard's measure (issue 23, 7).

A pure function of the diff text (`git diff <merge base> HEAD`, or `agents.edits.unified_diff`'s), so it can be
measured again from a stored artifact. What the lifecycle does with it (flag it on the review page, ask a person
even in autonomous mode) is not decided here; `Scope.reasons(limits)` only words why a change is over them.

- lines changed: added plus removed lines of text files (a binary file counts as a file, not as lines);
- top-level modules: the first component of each path, `src/` skipped and `.py` dropped (`src/shop/cart.py` and
  `shop/__init__.py` are both `shop`; `tests/test_cart.py` is `tests`; `setup.py` is `setup`);
- CI, dependency and settings files by path, wherever they sit in the tree (monorepos nest them).
Hunks are read by the counts in their `@@` headers, so a removed line that reads `-- x` is never taken for a
file header.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from agents.ci_paths import is_ci

DEFAULT_MAX_LINES = 300
DEFAULT_MAX_MODULES = 2
DEPENDENCIES = ("requirements*.txt", "requirements*.in", "constraints*.txt", "pyproject.toml", "setup.py", "setup.cfg",
                "Pipfile", "Pipfile.lock", "poetry.lock", "uv.lock", "pdm.lock", "environment.yml", "environment.yaml",
                "package.json", "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "go.mod", "go.sum", "Cargo.toml",
                "Cargo.lock", "Gemfile", "Gemfile.lock")
DEPENDENCY_DIRS = ("requirements/",)  # requirements/base.txt and the like
# How the repository is run, tested, owned and configured: a change here can change what every other check means.
SETTINGS = (".gitattributes", ".gitmodules", ".gitconfig", "CODEOWNERS", "tox.ini", "tox.toml", "pytest.ini", "noxfile.py",
            ".coveragerc", "conftest.py", "Makefile", "Dockerfile", "docker-compose.yml", ".pre-commit-config.yaml",
            "settings.py", "local_settings.py", ".env", ".env.*", "*.env", "MANIFEST.in", ".aiteam.toml")
# CODEOWNERS, dependabot.yml ...; a Django settings package; other forges' CI and settings folders
SETTINGS_DIRS = (".github/", "settings/", ".gitlab/", ".gitea/", ".forgejo/", ".circleci/")
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@dataclass(frozen=True)
class FileChange:
    path: str  # the new path; the old one for a deletion
    added: int
    removed: int
    binary: bool = False


@dataclass(frozen=True)
class ScopeLimits:
    max_lines: int = DEFAULT_MAX_LINES
    max_modules: int = DEFAULT_MAX_MODULES


@dataclass(frozen=True)
class Scope:
    files: tuple[FileChange, ...] = ()
    modules: tuple[str, ...] = ()
    ci_files: tuple[str, ...] = ()
    dependency_files: tuple[str, ...] = ()
    settings_files: tuple[str, ...] = ()
    lines_changed: int = field(default=0)

    @property
    def empty(self) -> bool:
        return not self.files

    def reasons(self, limits: ScopeLimits = ScopeLimits()) -> list[str]:
        """Why the change needs a person's decision; empty when it is within the limits and touches none of them."""
        found = []
        if self.lines_changed > limits.max_lines:
            found.append(f"{self.lines_changed} lines changed, over the limit of {limits.max_lines}")
        if len(self.modules) > limits.max_modules:
            found.append(f"{len(self.modules)} top-level modules touched ({', '.join(self.modules)}), over the limit "
                         f"of {limits.max_modules}")
        for label, paths in (("CI", self.ci_files), ("dependency", self.dependency_files),
                             ("settings", self.settings_files)):
            if paths:
                found.append(f"changes {label} files: {', '.join(paths)}")
        return found

    def to_dict(self) -> dict[str, object]:
        return {"lines_changed": self.lines_changed, "modules": list(self.modules), "ci_files": list(self.ci_files),
                "dependency_files": list(self.dependency_files), "settings_files": list(self.settings_files),
                "files": [{"path": f.path, "added": f.added, "removed": f.removed, "binary": f.binary}
                          for f in self.files]}


def measure(diff: str) -> Scope:
    files = parse_diff(diff)
    paths = sorted({f.path for f in files})
    return Scope(files=tuple(files), modules=tuple(sorted({module_of(p) for p in paths})),
                 ci_files=tuple(p for p in paths if is_ci(p)),
                 dependency_files=tuple(p for p in paths if is_dependency(p)),
                 settings_files=tuple(p for p in paths if is_settings(p) and not is_ci(p)),
                 lines_changed=sum(f.added + f.removed for f in files))


def module_of(path: str) -> str:
    parts = path.split("/")
    if parts[0] == "src" and len(parts) > 1:
        parts = parts[1:]
    return parts[0].removesuffix(".py") if len(parts) == 1 else parts[0]


def is_dependency(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, p) for p in DEPENDENCIES) or _under(path, DEPENDENCY_DIRS)


def is_settings(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, p) for p in SETTINGS) or _under(path, SETTINGS_DIRS)


def _under(path: str, dirs: tuple[str, ...]) -> bool:
    return any(path.startswith(d) or f"/{d}" in path for d in dirs)


def parse_diff(diff: str) -> list[FileChange]:
    """One FileChange per `diff --git` section (or per `---`/`+++` pair in a diff without them)."""
    sections: list[FileChange] = []
    lines = diff.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("diff --git ") or (lines[i].startswith("--- ") and _next_is(lines, i, "+++ ")):
            change, i = _section(lines, i)
            sections.append(change)
        else:
            i += 1
    return sections


def _section(lines: list[str], i: int) -> tuple[FileChange, int]:
    """Read one file's headers and hunks from line i; return it and the index after it."""
    header = lines[i][len("diff --git "):] if lines[i].startswith("diff --git ") else ""
    old = new = None
    binary = False
    i += 1 if header else 0
    while i < len(lines) and not lines[i].startswith(("@@", "diff --git ")):
        line = lines[i]
        if line.startswith("--- "):
            old = _path(line[4:])
        elif line.startswith("+++ "):
            new = _path(line[4:])
        elif line.startswith(("rename to ", "copy to ")):
            new = _unquote(line.split(" ", 2)[2])
        elif line.startswith("Binary files ") or line == "GIT binary patch":
            binary = True
        i += 1
        if new is not None and old is not None:
            break
    added = removed = 0
    while i < len(lines) and (match := _HUNK.match(lines[i])):
        a, r, i = _hunk(lines, i + 1, int(match[1] or 1), int(match[2] or 1))
        added, removed = added + a, removed + r
    path = new or old or _header_path(header)
    return FileChange(path=path, added=added, removed=removed, binary=binary), i


def _hunk(lines: list[str], i: int, old_count: int, new_count: int) -> tuple[int, int, int]:
    added = removed = 0
    while i < len(lines) and (old_count > 0 or new_count > 0):
        tag = lines[i][:1]
        if tag == "+":
            added, new_count = added + 1, new_count - 1
        elif tag == "-":
            removed, old_count = removed + 1, old_count - 1
        elif tag in (" ", ""):
            old_count, new_count = old_count - 1, new_count - 1
        i += 1  # "\ No newline at end of file" counts for neither side
    while i < len(lines) and lines[i].startswith("\\"):
        i += 1
    return added, removed, i


def _next_is(lines: list[str], i: int, prefix: str) -> bool:
    return i + 1 < len(lines) and lines[i + 1].startswith(prefix)


def _path(text: str) -> str | None:
    """`a/x.py` -> `x.py`; `/dev/null` -> None; a C-quoted path (git quotes odd characters) unquoted."""
    text = _unquote(text.split("\t", 1)[0])
    if text == "/dev/null":
        return None
    return text[2:] if text.startswith(("a/", "b/")) else text


def _header_path(header: str) -> str:
    """`a/x b/x` (a mode change or a binary file with no ---/+++ lines): the two halves are the same path."""
    half = _unquote(header[len(header) // 2 + 1:]) if header else ""
    return half[2:] if half.startswith("b/") else half


def _unquote(text: str) -> str:
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        return text
    raw = text[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return raw.encode("latin-1").decode("utf-8", "replace")
