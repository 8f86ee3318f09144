"""How a test command is wrapped so that untrusted generated code cannot hurt the host.

Layers, each applied only where the host allows it (probed once per process):

- **bubblewrap** (``bwrap.py``; root and Debian's ``bubblewrap``): new network, PID, IPC and UTS namespaces and a
  file system built from an allow-list: the OS's ``/usr``, the interpreter and the venv read-only, the scratch copy
  read-write, private tmpfs on ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (bounded in size), a minimal ``/dev``, the
  run's own ``/proc``, the loader's cache, the host's time zone and an ``/etc/hosts`` of our own. What is not on the list does not
  exist for the run: ``/etc/passwd``, other checkouts, every tenant's workspaces, the host's processes.
- **Privilege drop** (root + ``setpriv``): the command runs as the run slot's uid (``slots.py``) with no groups,
  no capabilities and no-new-privs. Its scratch dir is its own; everything else it sees is root's and read-only,
  and RLIMIT_NPROC is enforced (the kernel does not enforce it for root).
- **rlimits** (always): CPU seconds, address space, processes, file size, no core files.
  Set in the child before exec, inherited by everything it starts.
- **Environment** (always): built from scratch; nothing of the worker's (API keys,
  DATABASE_URL, ...) is inherited. HOME is the scratch dir, so the user site-packages is
  turned off: a system (non-venv) interpreter would otherwise import the project's own
  ``.local/lib/pythonX.Y/site-packages/pytest.py`` ahead of the real one.

With neither bubblewrap nor the privilege drop (a worker that is not root) the code would run as the worker's own
user, able to read its secrets (``/proc/<worker>/environ``) and every tenant's workspace: ``wrap`` refuses with
``SandboxUnavailable`` (an operator's matter, not a test failure) unless the operator allowed it (setting
``AITEAM_SANDBOX_ALLOW_UNISOLATED``). Where a mechanism is missing but that floor holds, or the operator allowed
running below it, the run happens and ``Wrapped.description`` says what was left out:

- No bubblewrap (not installed, not root, or namespaces forbidden as in Docker): the network is NOT isolated, every
  world-readable host file (``/etc/passwd``, other checkouts, workspaces readable by others) is readable, /tmp is
  the host's, and the process tree is killed through its process group plus a sweep of /proc for processes
  carrying the run's marker variable (best effort: a process that re-execs with an empty environment in a new
  session escapes).
- Not root (allowed runs only): no privilege drop; the code can read and write whatever the worker's user can,
  and RLIMIT_NPROC counts all of that user's processes.
- Root with an interpreter the run's uid cannot reach (a prefix not readable by others; allowed runs only, or
  under bubblewrap): no drop; under bubblewrap the command runs as uid 0 with every capability dropped, without it
  as root with rlimits only. Deploy with a world-readable interpreter.

Known limits even with everything available: what lies inside the allow-list stays readable (all of ``/usr``, the
whole venv and interpreter prefix: a var dir placed inside the venv would be exposed); the run may create user
namespaces of its own where the host allows unprivileged ones (bwrap, as root, needs none: the host may turn them
off); no seccomp filter; memory is bounded per process (RLIMIT_AS) and per tmpfs, not for the run as a whole (no
per-run cgroup: see docs/adr/0024); disk use of the scratch dir is bounded per file, not in total.
"""
from __future__ import annotations

import os
import resource
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

import agents.sandbox.bwrap as bwrap

SANDBOX_UID = 65534  # nobody/nogroup: the uid a run drops to when no run slot gives it one of its own (slots.py)
RUN_MARKER = "AITEAM_SANDBOX_RUN"  # env variable that identifies a run's processes for the /proc sweep
_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"  # where bwrap and setpriv are looked up, by us and by the run


def _setpriv(uid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--inh-caps=-all",
            "--bounding-set=-all", "--"]


_GiB = 1024**3
_MiB = 1024**2


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 60.0  # wall clock for the whole run
    cpu_s: int = 60  # per process
    memory_bytes: int = 1 * _GiB  # address space per process (RLIMIT_AS)
    max_processes: int = 64  # processes of the run's uid (RLIMIT_NPROC)
    max_file_size_bytes: int = 16 * _MiB  # also bounds the output log and the junit report
    max_output_chars: int = 20_000  # tail of stdout+stderr kept in the report


class SandboxUnavailable(RuntimeError):
    """The host cannot isolate a test run well enough to start it: the tools failed, not the work (a step that
    raises it goes to an operator, never back to the engineer as a failing test)."""


@dataclass(frozen=True)
class Wrapped:
    argv: list[str]
    description: str
    drops_privileges: bool


def bwrap_available() -> bool:
    """Whether runs get bubblewrap's namespaces and allow-listed file system here (one probe per process)."""
    return bwrap.available()


def wrap(command: list[str], *, scratch: Path, limits: SandboxLimits, uid: int = SANDBOX_UID,
         read_only: Sequence[Path] = ()) -> Wrapped:
    """The argv that runs command under every layer this host allows, as `uid` where privileges can be dropped.
    read_only: more directories the run needs and may not change (a repository's prepared venv), bound like the
    interpreter. Raises SandboxUnavailable when neither bubblewrap nor the privilege drop apply, unless
    AITEAM_SANDBOX_ALLOW_UNISOLATED is on."""
    contained = bwrap_available()
    interpreter = _outermost([*_interpreter_paths(), *read_only])
    drop = can_drop_privileges(interpreter, [*interpreter, scratch], contained=contained)
    if not (contained or drop):
        _refuse_unless_allowed()
    inside = [*_setpriv(uid), *command] if drop else list(command)
    if contained:
        # Without the drop the command would keep root's capabilities inside (mount, ptrace, raw sockets...).
        outer = bwrap.argv(scratch=scratch, read_only=interpreter, hosts=bwrap.hosts_file(scratch.parent),
                           tmp_size=_tmp_size(limits), drop_capabilities=not drop)
        inside = [*outer, *inside]
    return Wrapped(inside, _describe(contained, interpreter, drop, uid), drop)


def runs_as(uid: int, scratch: Path, read_only: Sequence[Path] = ()) -> int:
    """The uid the command of ``wrap(..., uid=uid, read_only=...)`` will have, and so who must own its scratch copy."""
    interpreter = _outermost([*_interpreter_paths(), *read_only])
    drop = can_drop_privileges(interpreter, [*interpreter, scratch], contained=bwrap_available())
    return uid if drop else os.geteuid()


def _tmp_size(limits: SandboxLimits) -> int:
    """Each private tmpfs: room for a few of the largest files a run may write (RLIMIT_FSIZE)."""
    return max(4 * limits.max_file_size_bytes, 8 * _MiB)


def _refuse_unless_allowed() -> None:
    if not _setting("AITEAM_SANDBOX_ALLOW_UNISOLATED", False):
        raise SandboxUnavailable(
            "refusing to run generated tests unisolated: no bubblewrap (needs root and Debian's bubblewrap) and no "
            f"drop to an unprivileged uid (needs root, setpriv and an interpreter that uid can reach), so they would "
            f"run as uid {os.geteuid()} and could read the worker's secrets and every tenant's workspace. Run the "
            "sandbox worker as root with bubblewrap installed, or set AITEAM_SANDBOX_ALLOW_UNISOLATED=1 on a trusted "
            "single-tenant install.")


def can_drop_privileges(interpreter: list[Path], expose: list[Path], *, contained: bool) -> bool:
    """Root, setpriv, and an interpreter the run's uid can start: its paths passable by "others" and, without
    bubblewrap to bind them into a fresh root, no untraversable directory above them. (The scratch dir belongs to
    that uid.)"""
    reachable = all(_traversable(p) for p in interpreter) and (contained or not _blocked_ancestors(expose))
    return os.geteuid() == 0 and shutil.which("setpriv", path=_SYSTEM_PATH) is not None and reachable


def environment(scratch: Path, marker: str) -> dict[str, str]:
    venv_bin = Path(sys.executable).parent
    return {
        "PATH": f"{venv_bin}:{_SYSTEM_PATH}",
        "HOME": str(scratch),
        "TMPDIR": str(scratch / "tmp"),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONUNBUFFERED": "1",  # keeps stdout and stderr interleaved in the log as they happened
        # HOME is the scratch dir: a system interpreter would put the project's .local/lib/pythonX.Y/site-packages
        # on sys.path ahead of site-packages, where a fake pytest or coverage could forge a passing run. Unlike -s,
        # this also reaches every interpreter the tests start.
        "PYTHONNOUSERSITE": "1",
        # The venv's plugins (pytest-django, playwright, ...) are aiteam's, not the generated
        # project's: loading them would make its results depend on them, and slow every run.
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        RUN_MARKER: marker,
    }


def rlimit_setter(limits: SandboxLimits) -> Callable[[], None]:
    """Values are computed here, in the parent; the returned function only calls setrlimit (runs between fork and exec)."""
    wanted = {
        resource.RLIMIT_CPU: (limits.cpu_s, limits.cpu_s + 1),  # SIGXCPU at the soft limit, SIGKILL a second later
        resource.RLIMIT_AS: (limits.memory_bytes, limits.memory_bytes),
        resource.RLIMIT_NPROC: (limits.max_processes, limits.max_processes),
        resource.RLIMIT_FSIZE: (limits.max_file_size_bytes, limits.max_file_size_bytes),
        resource.RLIMIT_CORE: (0, 0),
    }
    pairs = [(res, _clamp(res, soft, hard)) for res, (soft, hard) in wanted.items()]

    def apply() -> None:
        for res, value in pairs:
            resource.setrlimit(res, value)

    return apply


def _clamp(res: int, soft: int, hard: int) -> tuple[int, int]:
    # Without root a hard limit can only be lowered; asking for more would fail the exec.
    current = resource.getrlimit(res)[1]
    if current != resource.RLIM_INFINITY:
        hard = min(hard, current)
    return min(soft, hard), hard


def _interpreter_paths() -> list[Path]:
    """The venv (site-packages, the python symlink) and the real interpreter's prefix (stdlib, libpython)."""
    prefixes = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.base_prefix).resolve()]
    return _outermost([*prefixes, Path(sys.executable).resolve().parent])


def _setting(name: str, default: Any) -> Any:
    try:
        return getattr(settings, name, default)
    except ImproperlyConfigured:  # imported outside Django (a script): nothing configured, the safe default
        return default


def _blocked_ancestors(paths: Iterable[Path]) -> list[Path]:
    blocked = []
    for path in paths:
        first = next((a for a in reversed(path.parents) if not _traversable(a)), None)
        if first is not None:
            blocked.append(first)
    return blocked


def _traversable(path: Path) -> bool:
    """Whether the sandbox uid (which owns nothing and is in no owning group) may pass through path."""
    try:
        return bool(os.stat(path).st_mode & 0o001)
    except OSError:
        return False


def _outermost(paths: Iterable[Path]) -> list[Path]:
    unique = sorted(set(paths), key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in unique:
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return kept


def _describe(contained: bool, read_only: list[Path], drop: bool, uid: int) -> str:
    if contained:
        shown = " ".join(str(p) for p in read_only if not p.is_relative_to("/usr"))
        parts = ["bwrap netns+pidns+ipcns+utsns", f"allow-list fs (ro /usr {shown}; rw scratch; private tmpfs "
                 "/tmp /var/tmp /dev/shm; /etc: ld.so.cache, localtime, own hosts)"]
    else:
        parts = ["no bwrap (bubblewrap missing, not root, or namespaces forbidden): network NOT isolated, host files "
                 "readable, host /tmp, process-group kill + /proc sweep"]
    if drop:
        parts.append(f"uid {uid}")
    elif os.geteuid() == 0:
        parts.append("uid 0 NOT dropped (setpriv missing or interpreter unreachable for the run's uid; nproc not "
                     "enforced" + ("; capabilities dropped)" if contained else ")"))
    else:
        parts.append(f"uid {os.geteuid()} (not root: no privilege drop)")
    if not (contained or drop):
        parts.append("UNISOLATED: allowed by AITEAM_SANDBOX_ALLOW_UNISOLATED")
    parts += ["rlimits cpu/as/nproc/fsize/core", "clean env"]
    return ", ".join(parts)
