"""How a Python repository runs its tests, turned into a pytest run whose JUnit report gives each test's outcome.

Order: the project's setting, then ``.aiteam.toml`` (``[tests] command = "..."``) in the repository, then what
the repository shows: a pytest configuration, tox.ini's ``[testenv] commands``, Django's ``manage.py``, a Makefile
``test`` target, test files pytest collects by name, unittest discovery. tox and make are read, not run: tox
would build its own environments (with network) and a recipe may do anything; the pytest, unittest or
``manage.py test`` line inside them is what counts. Every form runs under pytest (unittest's TestCase natively,
Django's through pytest-django), so results are read per test from one JUnit format, never from log text.

Read the command at the base commit and keep it for the run after the change: a change to the repository's own
configuration must not decide how that change is judged.
"""
from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import agents.environments.pyconfig as pyconfig

# Other ecosystems' project files, named in the refusal of a repository that is not Python.
_OTHER_KINDS = {"package.json": "JavaScript", "go.mod": "Go", "Cargo.toml": "Rust", "pom.xml": "Java (Maven)",
                "build.gradle": "Java (Gradle)", "build.gradle.kts": "Kotlin (Gradle)", "Gemfile": "Ruby",
                "composer.json": "PHP", "mix.exs": "Elixir", "CMakeLists.txt": "C/C++ (CMake)", "Package.swift": "Swift"}
_PYTHON_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "Pipfile", "tox.ini", "manage.py",
                 "pytest.ini", "pytest.toml")
_SKIPPED_DIRS = frozenset({"node_modules", "venv", "build", "dist", "site-packages", "__pycache__"})
_MAX_FILES = 20_000  # files looked at when searching the tree; a repository larger than that is read in part
# Options that would stop the run early, run only part of it, or write the report elsewhere: the comparison
# with the baseline needs every test's outcome in aiteam's own report.
_REFUSED = {"-x": "stops at the first failure", "--exitfirst": "stops at the first failure",
            "--maxfail": "stops after some failures", "--lf": "runs only last failures",
            "--last-failed": "runs only last failures", "--ff": "reorders by last failures",
            "--sw": "stops at a failure", "--stepwise": "stops at a failure", "--co": "runs nothing",
            "--collect-only": "runs nothing", "--junitxml": "moves the report", "--junit-xml": "moves the report",
            "--pdb": "waits for a debugger", "--rootdir": "is pinned by the runner"}
_TAKES_VALUE = frozenset({"-k", "-m", "-o", "--override-ini", "-p", "-c", "--config-file", "--ds", "--dc",
                          "--deselect", "--ignore", "--ignore-glob", "--tb", "-W", "--pythonwarnings", "--confcutdir",
                          "--import-mode", "--durations", "--durations-min", "--log-level", "-r", "--capture",
                          "--junit-prefix", "--log-file",
                          "--log-file-level", "--log-cli-level", "--log-format", "--log-date-format",
                          "--log-cli-format", "--log-cli-date-format", "--log-file-format", "--log-file-date-format",
                          "--color", "--code-highlight", "--doctest-glob", "--doctest-report", "--show-capture",
                          "--verbosity", "--timeout", "--timeout-method", "--reruns", "--reruns-delay", "--only-rerun",
                          "--hypothesis-profile", "--hypothesis-seed", "--random-order-bucket", "--random-order-seed",
                          "--asyncio-mode"})
# pytest's own options that never take a value: the word after one is a path (or, with --pyargs, a module)
_FLAGS = frozenset({"--pyargs", "--strict-markers", "--strict-config", "--strict", "--doctest-modules", "--runxfail",
                    "--showlocals", "--no-header", "--no-summary", "--disable-warnings", "--disable-pytest-warnings",
                    "--verbose", "--quiet", "--full-trace", "--setup-show", "--setup-only", "--setup-plan",
                    "--doctest-continue-on-failure", "--doctest-ignore-import-errors", "--new-first", "--nf",
                    "--continue-on-collection-errors", "--trace", "--keep-duplicates"})
# Left out of the command, with their values: coverage is not measured on a repository (pytest-cov may not even be
# installed, and its report is not aiteam's), and the run's temporary directory is the sandbox's (pytest empties
# --basetemp before it starts); nor is the run spread over pytest-xdist's workers: they do not get the outcome
# stream, so no test of theirs, the canaries included, would be reported (the run would read as forged).
_DROPPED_VALUED = frozenset({"--cov-report", "--cov-config", "--cov-fail-under", "--cov-context", "--cov-precision",
                             "--basetemp", "-n", "--numprocesses", "--dist", "--maxprocesses", "--tx"})
_XDIST_ATTACHED = re.compile(r"-n\S+")  # -n4, -nauto
_DROPPED_FLAGS = frozenset({"--cov-branch", "--cov-append", "--cov-reset", "--no-cov", "--no-cov-on-fail"})
_COV = "--cov"  # takes a value when one follows (argparse's nargs="?"): `--cov src tests` measures src, runs tests
# A tox substitution tox.ini's commands still hold once {posargs}, {toxinidir} and {env:...} are read: a path of
# tox's own environment ({envtmpdir}, {envdir}, ...) that does not exist here.
_UNRESOLVED = re.compile(r"\{[^{}\s]*\}")
_MAKE_VARIABLE = re.compile(r"^\$[({][^)}]*[)}]$")  # $(TESTS), ${tests}: a make variable, empty unless given
_TOX_DEFAULTED = re.compile(r"\{(?:posargs|env:[^:{}]*):?([^{}]*)\}")  # {posargs:tests}, {env:X:default}
_TOX_ROOT = re.compile(r"\{(?:toxinidir|tox_root)\}")
# After the repository's options: --maxfail=0, since an `-x` in the configuration's addopts would cut a baseline
# short; --continue-on-collection-errors, since a module that cannot be imported would otherwise stop the run
# before any test ran, and hide every other module's outcomes (it is reported as that module's error).
_WHOLE_RUN = ("--maxfail=0", "--continue-on-collection-errors")
_DJANGO_VALUED = frozenset({"--parallel", "-v", "--verbosity", "--testrunner", "--tag", "--exclude-tag", "-k",
                            "-p", "--pattern", "-t", "--top-level-directory", "--pythonpath", "--settings"})
NO_TESTS_YET = "no test files yet: pytest over the repository"  # the source of the last resort
PROJECT_SETTING = "project setting"
GIVEN = (PROJECT_SETTING, pyconfig.AITEAM_FILE)  # a command a person wrote down for aiteam, not one read from clues
_PYTHONS = ("python", "python3", "py", "{envpython}", "$(PYTHON)", "$(PY)", "${PYTHON}", "$PYTHON")


class NotPython(ValueError):
    """The repository is not a Python one: aiteam prepares and tests only those so far."""


class BadTestCommand(ValueError):
    """A test command (the project's, or the repository's .aiteam.toml) that aiteam cannot run per test."""


@dataclass(frozen=True)
class TestCommand:
    __test__ = False  # a Test* class: keep pytest from collecting it where it is imported

    runner: str  # what the repository uses: "pytest", "unittest" or "django" (pytest runs all three)
    paths: tuple[str, ...]  # what pytest collects, relative to the root
    args: tuple[str, ...]  # pytest options
    pythonpath: tuple[str, ...]  # importable roots, relative to the root
    source: str  # where it was found, for the gate page: "project setting", "pytest.ini", "Makefile test", ...
    shown: str  # the command as written there
    plugins: tuple[str, ...] = ()  # distributions the environment needs beyond pytest
    dropped: tuple[str, ...] = ()  # what was left out of what is written (coverage, tox's own paths), for a person


def detect_test_command(root: Path, *, configured: str | None = None) -> TestCommand:
    """The repository's test command; NotPython for another kind of repository, BadTestCommand for a command
    (set for the project or in .aiteam.toml) that aiteam cannot run."""
    ensure_python(root)
    if configured and configured.strip():
        return parse_command(root, configured, source=PROJECT_SETTING)
    try:
        written = pyconfig.aiteam_command(root)
    except ValueError as exc:
        raise BadTestCommand(str(exc)) from exc
    if written:
        return parse_command(root, written, source=pyconfig.AITEAM_FILE)
    for clue in (_from_pytest_config, _from_tox, _from_django, _from_makefile, _from_file_names):
        if (found := clue(root)) is not None:
            return found
    return _pytest(root, [], source=NO_TESTS_YET, shown="pytest")


def ensure_python(root: Path) -> None:
    if any((root / name).is_file() for name in _PYTHON_FILES) or any(root.glob("requirements*.txt")):
        return
    others = [f"{name} ({kind})" for name, kind in _OTHER_KINDS.items() if (root / name).exists()]
    if others or next(_files(root, ".py"), None) is None:
        found = ", ".join(others) or "no Python file"
        raise NotPython(f"aiteam prepares and tests Python repositories only; this one has {found} and no Python "
                        "project file (pyproject.toml, setup.py, setup.cfg, requirements*.txt, manage.py)")


def parse_command(root: Path, text: str, *, source: str) -> TestCommand:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise BadTestCommand(f"{source}: cannot split {text!r} into words ({exc})") from exc
    found = _recognized(root, words, source=source, shown=text)
    if found is None:
        raise BadTestCommand(
            f"{source}: {text!r} is not a test command aiteam can run per test. Use pytest [options] [paths], "
            "python -m pytest, python -m unittest [discover ...], python manage.py test [labels], django-admin test "
            "--settings=<module> [labels] (or python -m django test ...), tox or make test")
    return found


def _recognized(root: Path, words: list[str], *, source: str, shown: str, nested: bool = False,
                cwd: str = ".") -> TestCommand | None:
    """cwd: where the command runs, relative to the root (tox's changedir): its paths and labels are read from there."""
    if not words:
        return None
    head, rest, script = os.path.basename(words[0]), words[1:], words[0]
    if head == "coverage" and rest[:1] == ["run"]:  # coverage run [options] -m module | script.py
        start = next((i for i, w in enumerate(rest) if w == "-m" or _is_script(w)), None)
        head, rest = ("python", rest[start:]) if start is not None else (head, rest)
    if head in _PYTHONS or head.startswith("python3."):
        if rest[:1] == ["-m"] and len(rest) > 1:
            head, rest = rest[1], rest[2:]
        elif rest and _is_script(rest[0]):
            script, head, rest = rest[0], os.path.basename(rest[0]), rest[1:]
    if head == "runtests.py" and (settings := pyconfig.django_test_script(root / _inside(root, script, source, cwd))):
        head, rest = "manage.py", ["test", *rest, f"--settings={settings}"]  # what it hands to Django, read not run
    if head in ("pytest", "py.test"):
        return _pytest(root, rest, source=source, shown=shown, cwd=cwd)
    if head == "unittest":
        return _unittest(root, rest, source=source, shown=shown, cwd=cwd)
    if head in ("manage.py", "django-admin", "django") and rest[:1] == ["test"]:
        return _django(root, rest[1:], source=source, shown=shown, cwd=cwd)
    if not nested and head == "tox":
        return _first(root, pyconfig.tox_commands(root), source=f"{source} → tox.ini [testenv] commands", tox=True)
    if not nested and head == "make" and [w for w in rest if not w.startswith("-")] in ([], ["test"]):
        return _first(root, pyconfig.makefile_recipe(root), source=f"{source} → Makefile test")
    return None


def _is_script(word: str) -> bool:
    return word.endswith(".py") and not word.startswith("-")


def _first(root: Path, lines: list[str], *, source: str, tox: bool = False) -> TestCommand | None:
    """The first pytest, unittest or manage.py test among lines of a tox or make recipe (`a && b` split), tox's
    substitutions read as tox would with no arguments given ({posargs} empty or its default, {toxinidir} the root,
    {env:NAME:default} its default) and make's variables empty. A tox line for some environments only (`unit:
    pytest tests`) counts when no line for every environment does: the first such that aiteam can run as written."""
    factors = [pyconfig.TOX_FACTOR.match(line) if tox else None for line in lines]
    cwd = _tox_changedir(root) if tox else "."
    source = source if cwd == "." else f"{source}, in changedir {cwd}"
    for line in [line for line, factor in zip(lines, factors, strict=True) if factor is None]:
        if (found := _first_in(root, line, source=source, cwd=cwd)) is not None:
            return found
    for factor in filter(None, factors):
        try:
            found = _first_in(root, factor.string[factor.end():], source=f"{source} ({factor.group(0).strip()})",
                              cwd=cwd)
        except BadTestCommand:  # another environment's command is no reason to refuse the repository
            continue
        if found is not None:
            return found
    return None


def _tox_changedir(root: Path) -> str:
    """tox.ini's [testenv] changedir (the default environment's), {toxinidir} read as the root: "." without one."""
    lines = [line for line in pyconfig.tox_setting(root, "changedir") if not pyconfig.TOX_FACTOR.match(line)]
    if not lines:
        return "."
    return posixpath.normpath(_TOX_ROOT.sub(".", lines[0]).strip() or ".")


def _first_in(root: Path, line: str, *, source: str, cwd: str = ".") -> TestCommand | None:
    for part in line.replace("&&", ";").split(";"):
        cleaned = _TOX_DEFAULTED.sub(r"\1", _TOX_ROOT.sub(".", part.strip().lstrip("@-+"))).strip()
        try:
            words = shlex.split(cleaned)
        except ValueError:
            continue
        words = words[:1] + [word for word in words[1:] if word != "[]" and not _MAKE_VARIABLE.match(word)]
        if (found := _recognized(root, words, source=source, shown=cleaned, nested=True, cwd=cwd)) is not None:
            return found
    return None


def _pytest(root: Path, words: list[str], *, source: str, shown: str, cwd: str = ".") -> TestCommand:
    args, paths, dropped = _split_pytest(root, words, source, cwd=cwd)
    config = pyconfig.pytest_config(root)
    here = _inside(root, ".", source, cwd)
    if not paths and here != ".":  # pytest reads testpaths only when it runs in the root
        paths = [here]
    if not paths:  # as pytest reads testpaths: globs expanded, what matches nothing skipped, "." when none does
        paths = [found for pattern in (config.testpaths if config else ()) for found in _matching(root, pattern)] \
            or ["."]
    kept, left_out = _split_addopts(root, config.addopts if config else ())
    if left_out:  # the configuration's own options without coverage: -o replaces them as a whole
        args += ["-o", f"addopts={shlex.join(kept)}"]
    return TestCommand("pytest", tuple(paths), (*args, *_WHOLE_RUN), _importable(root, here), source, shown,
                       dropped=(*dropped, *(f"{word} (addopts)" for word in left_out)))


def _matching(root: Path, pattern: str) -> list[str]:
    """What a testpaths entry (a path or a glob, relative to the configuration) names in the checkout, in order."""
    try:
        return sorted(path.relative_to(root).as_posix() for path in root.glob(pattern))
    except (ValueError, NotImplementedError):  # absolute or otherwise unusable: pytest would find nothing here either
        return []


def _split_pytest(root: Path, words: list[str], source: str, *, refuse: bool = True,
                  cwd: str = ".") -> tuple[list[str], list[str], list[str]]:
    """(options, paths, what was left out) of pytest's arguments; an option aiteam cannot run with is refused
    (BadTestCommand), or left out too when not `refuse`."""
    args: list[str] = []
    paths: list[str] = []
    dropped: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        option = word.split("=", 1)[0]
        refused = option in _REFUSED or (word == "-p" and words[index + 1:index + 2] == ["no:junitxml"])
        if refused and refuse:
            why = _REFUSED.get(option, "turns off the report")
            raise BadTestCommand(f"{source}: pytest option {word} {why}; aiteam needs every test's outcome")
        group = words[index:index + 1 + _value_words(root / cwd, words, index)]
        if refused or option in _DROPPED_VALUED or option in _DROPPED_FLAGS or option == _COV or _XDIST_ATTACHED.fullmatch(word) \
                or any(_UNRESOLVED.search(part) for part in group):
            dropped.append(" ".join(group))
        elif not word.startswith("-"):
            paths.append(_inside(root, word, source, cwd))
        else:
            args += group
        index += len(group)
    return args, paths, dropped


def _value_words(root: Path, words: list[str], index: int) -> int:
    """How many of the words after words[index] are its value: one for an option known to take one, given apart
    (`-k expr`, `--cov src`), and for an unknown long option followed by a word that names nothing in the checkout
    (a plugin's `--flag value`); none otherwise."""
    word, following = words[index], words[index + 1] if index + 1 < len(words) else None
    if following is None or not word.startswith("-") or "=" in word:
        return 0
    if word in _TAKES_VALUE or word in _DROPPED_VALUED:
        return 1
    if following.startswith("-") or word in _DROPPED_FLAGS or word in _FLAGS:
        return 0
    if word == _COV:
        return 1
    return 0 if not word.startswith("--") or _names_a_path(root, following) else 1


def _names_a_path(root: Path, word: str) -> bool:
    path = PurePosixPath(word.split("::", 1)[0])
    return path.is_absolute() or ".." in path.parts or (root / path).exists()


def _split_addopts(root: Path, addopts: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The configuration's addopts without the options left out of a command (coverage, --basetemp, xdist), nor
    those a command may not hold (-x, --junitxml, --lf, ...: a configuration is not refused for them, they go)."""
    args, paths, dropped = _split_pytest(root, list(addopts), "addopts", refuse=False)
    return ([*args, *paths], dropped) if dropped else (list(addopts), [])


def _unittest(root: Path, words: list[str], *, source: str, shown: str, cwd: str = ".") -> TestCommand:
    flags = {"-s": "start", "--start-directory": "start", "-p": "pattern", "--pattern": "pattern",
             "-t": "top", "--top-level-directory": "top"}
    if words and words[0] != "discover" and not words[0].startswith("-"):  # named modules, classes or methods
        paths = tuple(_dotted_to_node(root, name, source, cwd) for name in words)
        return TestCommand("unittest", paths, _WHOLE_RUN, _importable(root, _inside(root, ".", source, cwd)), source,
                           shown)
    found: dict[str, str] = {}
    positional = ["start", "pattern", "top"]
    rest = words[1:] if words[:1] == ["discover"] else words
    index = 0
    while index < len(rest):
        word = rest[index]
        if word in flags and index + 1 < len(rest):
            found[flags[word]] = rest[index + 1]
            index += 1
        elif not word.startswith("-") and positional:
            found.setdefault(positional.pop(0), word)
        index += 1
    start = _inside(root, found.get("start", "."), source, cwd)
    top = _inside(root, found["top"], source, cwd) if "top" in found else start
    return TestCommand("unittest", (start,), ("-o", f"python_files={found.get('pattern', 'test*.py')}",
                                              *_WHOLE_RUN), _importable(root, _inside(root, ".", source, cwd), top),
                       source, shown)


def _django(root: Path, words: list[str], *, source: str, shown: str, cwd: str = ".") -> TestCommand:
    settings = next((w.split("=", 1)[1] for w in words if w.startswith("--settings=")), None)
    if "--settings" in words[:-1]:
        settings = words[words.index("--settings") + 1]
    here = _inside(root, ".", source, cwd)
    settings = settings or pyconfig.django_settings_module(root / here)
    if not settings:
        raise BadTestCommand(f"{source}: manage.py test, but manage.py sets no DJANGO_SETTINGS_MODULE and the "
                             "command gives no --settings")
    labels = [w for i, w in enumerate(words) if not w.startswith("-") and (i == 0 or words[i - 1] not in _DJANGO_VALUED)]
    paths = tuple(_dotted_to_node(root, label, source, cwd) for label in labels) or (here,)
    # Django's runner collects test*.py; pytest-django sets Django up from --ds and gives each test its database
    return TestCommand("django", paths, (f"--ds={settings}", "-o", "python_files=test*.py", *_WHOLE_RUN),
                       _importable(root, here), source, shown, plugins=("pytest-django",))


def _from_pytest_config(root: Path) -> TestCommand | None:
    config = pyconfig.pytest_config(root)
    return None if config is None else _pytest(root, [], source=config.source, shown="pytest")


def _from_tox(root: Path) -> TestCommand | None:
    return _first(root, pyconfig.tox_commands(root), source="tox.ini [testenv] commands", tox=True)


def _from_django(root: Path) -> TestCommand | None:
    if not (root / "manage.py").is_file():
        return None
    return _django(root, [], source="manage.py", shown="python manage.py test")


def _from_makefile(root: Path) -> TestCommand | None:
    return _first(root, pyconfig.makefile_recipe(root), source="Makefile test")


def _from_file_names(root: Path) -> TestCommand | None:
    """Test files by name: pytest's (test_*.py, *_test.py) when conftest.py or pytest is in sight or only pytest
    would collect them (colorama's *_test.py), else unittest's discovery (test*.py)."""
    tests = [path for path in _files(root, ".py") if path.name.startswith("test") or path.name.endswith("_test.py")]
    if not tests:
        return None
    pytest_named = [p for p in tests if p.name.startswith("test_") or p.name.endswith("_test.py")]
    discovered = [p for p in tests if p.name.startswith("test")]
    uses_pytest = not discovered or (root / "conftest.py").is_file() or any(
        "pytest" in (pyconfig.read_text(p) or "") for p in pytest_named[:200])
    if uses_pytest:
        return _pytest(root, [], source=f"{pytest_named[0].relative_to(root)} (pytest's file names)", shown="pytest")
    return _unittest(root, ["discover"], source="unittest discovery", shown="python -m unittest discover")


def _inside(root: Path, word: str, source: str, cwd: str = ".") -> str:
    """A path (or pytest node id) of the repository, relative to the root, from one relative to cwd (tox's
    changedir, itself relative to the root): nothing outside the checkout may be run."""
    path = PurePosixPath(word.split("::", 1)[0])
    if path.is_absolute() or ".." in path.parts:
        raise BadTestCommand(f"{source}: {word!r} is outside the repository")
    if cwd == ".":
        return word
    here = posixpath.normpath(cwd)
    if PurePosixPath(here).is_absolute() or here.split("/")[0] == ".." or _UNRESOLVED.search(here):
        raise BadTestCommand(f"{source}: tox runs the tests in changedir {cwd}, outside the repository; aiteam runs "
                             "them in the checkout (set the project's test_command setting, or [tests] command in "
                             ".aiteam.toml)")
    file, separator, rest = word.partition("::")
    return posixpath.normpath(posixpath.join(here, file)) + separator + rest


def _dotted_to_node(root: Path, name: str, source: str, cwd: str = ".") -> str:
    """unittest's and Django's dotted labels ("app.tests.test_x.TestA.test_b") as pytest paths or node ids."""
    if "/" in name or name.endswith(".py") or name == ".":
        return _inside(root, name, source, cwd)
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        base = "/".join(parts[:cut])
        if (root / cwd / f"{base}.py").is_file():
            return _inside(root, "::".join([f"{base}.py", *parts[cut:]]), source, cwd)
        if cut == len(parts) and (root / cwd / base).is_dir():
            return _inside(root, base, source, cwd)
    raise BadTestCommand(f"{source}: test label {name!r} names no module or package of the repository")


def _importable(root: Path, *command: str) -> tuple[str, ...]:
    """The root, src/ for a src layout, what the repository's pytest configuration adds (its own `pythonpath` is
    overridden by the runner's, so it is carried over), and the roots the command itself adds (unittest's top
    directory), for every form of command: ahead of site-packages, they make the checkout's code the one imported,
    not a release of it the environment installed (a docs extra, a plugin's dependency)."""
    src = root / "src"
    layout = ["src"] if src.is_dir() and not (src / "__init__.py").exists() else []
    config = pyconfig.pytest_config(root)
    extra = [path for path in (config.pythonpath if config else ()) if path not in (".", "src")
             and not PurePosixPath(path).is_absolute() and ".." not in PurePosixPath(path).parts]
    return tuple(dict.fromkeys([".", *layout, *extra, *command]))


def _files(root: Path, suffix: str) -> Iterator[Path]:
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIPPED_DIRS)
        for name in sorted(filenames):
            seen += 1
            if seen > _MAX_FILES:
                return
            if name.endswith(suffix):
                yield Path(dirpath, name)
