"""The repository's environment: a venv keyed by its dependency files and the interpreter, built once and reused.

This step has the network (pip reaches the operator's package sources); the tests that use the venv do not (the
sandbox binds it read-only). Layout under the cache directory, per key::

    env-<key>/venv/          the virtual environment (a python of the worker's version, no pip inside)
    env-<key>/install.log    pip's output
    env-<key>/requirements.txt  what pip installs (-r), as aiteam wrote it
    env-<key>/constraints.txt   the repository's pins pip is given with -c, when it has any
    env-<key>/.ready         written last: a venv without it (a crashed or failed build) is never reused
    env-<key>.lock           held while building, so two workers do not build the same venv at once

pip runs from the worker (``pip --python <venv>``) with a clean environment and no configuration file: only the
sources given here are used, and nothing of the worker's (API keys, DATABASE_URL) reaches the install, whose
build backends run code of the repository's dependencies. A failed install raises InstallFailed with the log's
tail, bounded and scrubbed of credentials and the worker's secrets, for a human to read.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agents.delivery.errors import scrub
from agents.environments.requirements import collect_requirements, dependency_files, environment_key
from agents.environments.wheels import normalized

READY = ".ready"
LOG_TAIL_CHARS = 4000
_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")  # a requirement line's distribution name
_SECRET_NAMES = re.compile(r"KEY|TOKEN|SECRET|PASS|CREDENTIAL|AUTH|DATABASE_URL|BROKER_URL", re.IGNORECASE)


@dataclass(frozen=True)
class PackageSources:
    index_url: str | None = None  # None: no index at all (pip --no-index): find_links only
    find_links: tuple[Path, ...] = ()
    # pytest (and pytest-django) for a repository whose own requirements lack them; wheels.repack_installed
    # fills one from the worker's installation
    runner_wheels: Path | None = None


@dataclass(frozen=True)
class Environment:
    venv: Path
    key: str
    reused: bool
    duration_s: float
    dependency_files: tuple[str, ...]
    requirements: tuple[str, ...]
    notes: tuple[str, ...]
    constraints: tuple[str, ...] = ()  # pins given to pip with -c (none installed by being listed)


class InstallFailed(RuntimeError):
    """The environment could not be built; `log_tail` (bounded, scrubbed) says why, for a human."""

    def __init__(self, message: str, log_tail: str) -> None:
        super().__init__(message)
        self.log_tail = log_tail


def prepare_environment(root: Path, *, cache_dir: Path, sources: PackageSources,
                        runner_packages: Sequence[str] = ("pytest",), timeout_s: float = 900.0) -> Environment:
    """The venv for the checkout at root: reused when one with the same key is ready, else built (under a lock).
    runner_packages: what the test command needs (testcmd.TestCommand.plugins, plus pytest)."""
    started = time.monotonic()
    files = dependency_files(root)
    requirements, constraints, notes = collect_requirements(root, files)
    key = environment_key(root, files, extra=tuple(sorted(runner_packages)), requirements=tuple(requirements),
                          constraints=tuple(constraints))
    home = _cache(cache_dir) / f"env-{key[:24]}"
    reused = (home / READY).is_file()
    if not reused:
        with _locked(home.with_suffix(".lock")):
            reused = (home / READY).is_file()  # another worker built it while this one waited
            if not reused:
                _build(home, requirements, constraints, sources, runner_packages, timeout_s)
    return Environment(home / "venv", key, reused, round(time.monotonic() - started, 3), tuple(files),
                       tuple(requirements), tuple(notes), tuple(constraints))


def ready_environment(cache_dir: Path, recorded: Environment) -> Environment | None:
    """The venv `recorded` names (by its key) when it is still ready in the cache, else None: a later step runs in
    the environment the baseline ran in, built again from the base commit's files only when it is gone."""
    home = Path(cache_dir) / f"env-{recorded.key[:24]}"
    if not (home / READY).is_file():
        return None
    return Environment(home / "venv", recorded.key, True, 0.0, recorded.dependency_files, recorded.requirements,
                       recorded.notes, recorded.constraints)


def _build(home: Path, requirements: list[str], constraints: list[str], sources: PackageSources,
           runner_packages: Sequence[str], timeout_s: float) -> None:
    shutil.rmtree(home, ignore_errors=True)  # what a crashed build left: never reused, started over
    home.mkdir()
    venv, log = home / "venv", home / "install.log"
    deadline = time.monotonic() + timeout_s
    _step("creating the venv", [str(_base_python()), "-m", "venv", "--without-pip", str(venv)], log, deadline)
    named = {normalized(match.group(1)) for line in requirements if (match := _NAME.match(line))}
    extra = [name for name in runner_packages if normalized(name) not in named]  # the repository's own pins win
    if extra and sources.runner_wheels is None:
        raise InstallFailed(f"the repository does not install {', '.join(extra)} and no runner wheelhouse is "
                            "configured", "")
    listed = home / "requirements.txt"
    listed.write_text("\n".join([*requirements, *extra]) + "\n")
    args = ["-r", str(listed)]
    if constraints:  # they pin the repository's requirements and the runner's packages alike
        pinned = home / "constraints.txt"
        pinned.write_text("\n".join(constraints) + "\n")
        args += ["-c", str(pinned)]
    # one pip run: the repository's requirements and the runner's packages are resolved together
    # the runner's wheelhouse is a source even when the repository names pytest itself (tox's `deps = pytest`,
    # unpinned): offline, it is the only one that has it
    links = (*sources.find_links, *([sources.runner_wheels] if sources.runner_wheels else []))
    both = PackageSources(sources.index_url, links)
    _step("installing the requirements", _pip(venv, both, args), log, deadline)
    missing = [name for name in runner_packages if not installed(venv, name)]
    if missing:
        raise InstallFailed(f"the install left out {', '.join(missing)}, which the test command needs", _tail(log))
    _readable(home)
    _mark_ready(home)


def installed(venv: Path, name: str) -> bool:
    """Whether the venv holds the distribution (its dist-info), read without starting its python."""
    return installed_version(venv, name) is not None


def installed_version(venv: Path, name: str) -> str | None:
    """The version of the distribution the venv holds, from its dist-info's name ("pytest-7.4.4.dist-info")."""
    wanted = normalized(name)
    for info in venv.glob("lib/python*/site-packages/*.dist-info"):
        found, _, version = info.name.removesuffix(".dist-info").partition("-")
        if normalized(found) == wanted:
            return version
    return None


def _step(what: str, argv: list[str], log: Path, deadline: float) -> None:
    with open(log, "ab") as out:
        out.write(f"$ {what}\n".encode())
        out.flush()
        try:
            code = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  env=_environment(log.parent), timeout=max(deadline - time.monotonic(), 1)).returncode
        except subprocess.TimeoutExpired:
            raise InstallFailed(f"{what} did not finish in time", _tail(log)) from None
    if code != 0:
        raise InstallFailed(f"{what} failed (exit {code})", _tail(log))


def _pip(venv: Path, sources: PackageSources, args: list[str]) -> list[str]:
    where = ["--index-url", sources.index_url] if sources.index_url else ["--no-index"]
    for folder in sources.find_links:
        where += ["--find-links", str(folder)]
    # wheels only: installing a wheel runs none of its code, while building a source distribution runs its setup
    # script here, outside the test sandbox, with the worker's rights and network (a tenant's repository names
    # what gets installed)
    return [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
            "--disable-pip-version-check", "--no-input", "--progress-bar", "off", "--only-binary", ":all:", *where,
            *args]


def _environment(home: Path) -> dict[str, str]:
    return {"PATH": _SYSTEM_PATH, "HOME": str(home), "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1",
            "PIP_CONFIG_FILE": os.devnull, "PIP_CACHE_DIR": str(home.parent / "pip-cache")}


def _base_python() -> Path:
    """The interpreter the worker's own venv was made from: the sandbox binds its prefix already."""
    return Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"


def _tail(log: Path) -> str:
    try:
        data = log.read_bytes()[-4 * LOG_TAIL_CHARS:].decode("utf-8", errors="replace")
    except OSError:
        return ""
    return scrub(data, *_secret_values())[-LOG_TAIL_CHARS:]


def _secret_values() -> list[str]:
    """Values of the worker's variables that look secret, longest first (one may contain another)."""
    values = [value for name, value in os.environ.items() if _SECRET_NAMES.search(name) and len(value) >= 8]
    return sorted(values, key=len, reverse=True)


def _readable(home: Path) -> None:
    """The sandbox's uid reads the venv (no write: it is bound read-only, and root's)."""
    for dirpath, _dirnames, filenames in os.walk(home):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            path = Path(dirpath, name)
            if not path.is_symlink():
                mode = path.stat().st_mode
                path.chmod(mode | 0o444 | (0o111 if mode & 0o100 else 0))


def _mark_ready(home: Path) -> None:
    staged = home / f"{READY}.{os.getpid()}"
    with open(staged, "w") as handle:
        json.dump({"python": sys.version.split()[0], "built_at": time.time()}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staged, home / READY)


def _cache(cache_dir: Path) -> Path:
    cache_dir.mkdir(parents=True, exist_ok=True)
    cache_dir.chmod(0o755)  # the sandbox's uid passes through to the venvs; mkdir's mode is cut by the umask
    return cache_dir


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel however the holder ends
        yield
    finally:
        os.close(fd)
