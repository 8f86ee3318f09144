"""How a test command is wrapped so that untrusted generated code cannot hurt the host.

Layers, each applied only where the host allows it (probed once per process):

- **Namespaces** (``unshare``, needs root or CAP_SYS_ADMIN): a new network namespace (only a
  loopback that is down, so nothing, not even 127.0.0.1 on the host, is reachable), a PID
  namespace with ``--kill-child`` (when the wrapper dies the namespace's init dies and the
  kernel kills every process in it, daemonized grandchildren included) and a mount
  namespace in which a small ``sh`` script, still as root, mounts a private tmpfs on each
  world-writable directory (/tmp, /var/tmp, /dev/shm, /run/lock: writes there vanish with the
  run and no other run sees them) and masks with an empty tmpfs the aiteam source tree (it
  holds the app's database and configuration), the var dir and the workspace and remote roots
  (every tenant's code; the run has its own copy in its scratch dir) and any directory the
  unprivileged uid cannot traverse (here /root, which holds the pyenv interpreter), then
  bind-mounts back only what the run needs: the venv, the interpreter's prefix and the
  scratch directory (which lives under /var/tmp).
- **Privilege drop** (root + ``setpriv``): the command runs as uid/gid 65534 with no
  groups, no capabilities and no-new-privs. Root-owned directories (the project tree, the
  sandbox root, the copied source) are then read-only to it, and RLIMIT_NPROC is enforced
  (the kernel does not enforce it for root).
- **rlimits** (always): CPU seconds, address space, processes, file size, no core files.
  Set in the child before exec, inherited by everything it starts.
- **Environment** (always): built from scratch; nothing of the worker's (API keys,
  DATABASE_URL, ...) is inherited. HOME is the scratch dir, so the user site-packages is
  turned off: a system (non-venv) interpreter would otherwise import the project's own
  ``.local/lib/pythonX.Y/site-packages/pytest.py`` ahead of the real one.

With neither namespaces nor the privilege drop (a worker that is not root) the code would run
as the worker's own user, able to read its secrets (``/proc/<worker>/environ``) and every
tenant's workspace: ``wrap`` refuses with ``SandboxUnavailable`` (an operator's matter, not a
test failure) unless the operator allowed it (setting ``AITEAM_SANDBOX_ALLOW_UNISOLATED``).
Where a mechanism is missing but that floor holds, or the operator allowed running below it,
the run happens and ``Wrapped.description`` says what was left out:

- No ``unshare`` (not root, or no CAP_SYS_ADMIN as in Docker): the network is NOT isolated, /tmp,
  /var/tmp, /dev/shm, the project tree and the var dir are the host's, and the process tree
  is killed through its process group plus a sweep of /proc for processes carrying the run's
  marker variable (best effort: a process that re-execs with an empty environment in a new
  session escapes).
- Not root (allowed runs only): no privilege drop; the code can read and write whatever the
  worker's user can, and RLIMIT_NPROC counts all of that user's processes.
- Root without namespaces and an interpreter that uid 65534 cannot reach (allowed runs only):
  the privilege drop is skipped (the interpreter would not start) and the code runs as root
  with rlimits only. Deploy with a world-readable interpreter (or allow ``unshare``).

Known limits even with everything available: world-readable host files outside the masked
trees (/etc, /usr, other checkouts) stay readable; the sandbox root must not live under /tmp
(the mount script reaches its staging area there before the private /tmp hides it); a var dir
inside the venv or the interpreter's prefix is not masked (the bind that exposes them would
uncover it); all concurrent runs share uid 65534 and so one RLIMIT_NPROC budget (a fork bomb
in one run can make another's forks fail until it is killed); disk use of the scratch dir is
bounded per file, not in total.
"""
from __future__ import annotations

import functools
import os
import resource
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

SANDBOX_UID = 65534  # nobody/nogroup: the uid a run drops to when no run slot gives it one of its own (slots.py)
RUN_MARKER = "AITEAM_SANDBOX_RUN"  # env variable that identifies a run's processes for the /proc sweep
_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"  # where unshare, setpriv, mount and sh are looked up, by us and by the run
_NAMESPACES = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--net", "--propagation", "private"]


def _setpriv(uid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--inh-caps=-all",
            "--bounding-set=-all", "--"]
# World-writable, so shared by every run and kept after it: each run gets its own empty tmpfs on those that exist.
_SHARED_WRITABLE = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path("/run/lock"))
# Settings naming where every tenant's data lives; masked unless the run needs something inside.
_TENANT_DATA_SETTINGS = ("VAR_DIR", "AITEAM_WORKSPACE_ROOT", "AITEAM_REMOTES_ROOT")
_STAGE_IN_TMP = "/tmp/.aiteam-stage"  # where the staging area waits while the other directories are covered
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


@functools.cache
def namespaces_available() -> bool:
    """One probe per process: the exact unshare flags plus the tmpfs mount the wrapper performs."""
    if shutil.which("unshare", path=_SYSTEM_PATH) is None:
        return False
    probe = [*_NAMESPACES, "--", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /tmp"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=10, env={"PATH": _SYSTEM_PATH}).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def wrap(command: list[str], *, scratch: Path, limits: SandboxLimits, uid: int = SANDBOX_UID) -> Wrapped:
    """The argv that runs command under every layer this host allows, as `uid` where privileges can be dropped.
    Raises SandboxUnavailable when neither namespaces nor the privilege drop apply, unless
    AITEAM_SANDBOX_ALLOW_UNISOLATED is on."""
    namespaces = namespaces_available()
    interpreter = _interpreter_paths()
    expose = _outermost([*interpreter, scratch])
    drop = can_drop_privileges(interpreter, expose, namespaces=namespaces)
    if not (namespaces or drop):
        _refuse_unless_allowed()
    if namespaces:
        hide = _hidden_paths(expose)
        private = _private_dirs()
        # Anything the run needs from under a covered directory (the scratch dir under /var/tmp, a checkout under
        # /tmp, the interpreter under /root) is staged first, then moved back into place over the covers.
        stage = scratch.parent / ".stage"
        stage.mkdir(mode=0o700, exist_ok=True)
        staged = [p for p in expose if _under_any(p, [*hide, *private])]
        script = _mount_script(hide, private, staged, limits, drop, stage, uid)
        argv = [*_NAMESPACES, "--", "sh", "-c", script, "sandbox", *command]
        return Wrapped(argv, _describe(namespaces, hide, private, drop, uid), drop)
    argv = [*_setpriv(uid), *command] if drop else list(command)
    return Wrapped(argv, _describe(namespaces, [], [], drop, uid), drop)


def _refuse_unless_allowed() -> None:
    if not _setting("AITEAM_SANDBOX_ALLOW_UNISOLATED", False):
        raise SandboxUnavailable(
            "refusing to run generated tests unisolated: no namespaces (unshare needs root or CAP_SYS_ADMIN) and no "
            f"drop to uid {SANDBOX_UID} (needs root, setpriv and an interpreter that uid can reach), so they would run "
            f"as uid {os.geteuid()} and could read the worker's secrets and every tenant's workspace. Run the sandbox "
            "worker as root, or set AITEAM_SANDBOX_ALLOW_UNISOLATED=1 on a trusted single-tenant install.")


def can_drop_privileges(interpreter: list[Path], expose: list[Path], *, namespaces: bool) -> bool:
    """Root, setpriv, and an interpreter uid 65534 can start: its paths passable by "others" and, without a mount
    namespace to bind them back, no untraversable directory above them. (The scratch dir belongs to that uid.)"""
    reachable = all(_traversable(p) for p in interpreter) and (namespaces or not _blocked_ancestors(expose))
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
    return _outermost([Path(sys.prefix), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent])


def _hidden_paths(expose: list[Path]) -> list[Path]:
    source_tree = Path(__file__).resolve().parents[2]  # the checkout holding agents/; inside site-packages when installed
    # A tree inside what the run needs (the source tree when installed) cannot be masked: the bind that exposes
    # the venv would uncover it. / or a parent of /tmp would hide the private /tmp itself.
    maskable = [p for p in [source_tree, *_tenant_data()]
                if not any(p.is_relative_to(e) for e in expose) and not Path("/tmp").is_relative_to(p)]
    return _outermost([*_blocked_ancestors(expose), *maskable])


def _tenant_data() -> list[Path]:
    """Where every tenant's workspaces and remotes live (they may lie outside the checkout, /var/lib/aiteam say)."""
    paths = [_setting(name, None) for name in _TENANT_DATA_SETTINGS]
    return [Path(p).resolve() for p in paths if p and Path(p).is_dir()]


def _private_dirs() -> list[Path]:
    """The world-writable directories this host has; /tmp first (the mount script needs it first)."""
    return [p for p in _SHARED_WRITABLE if p == Path("/tmp") or (p.is_dir() and not p.is_symlink())]


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


def _under_any(path: Path, roots: list[Path]) -> bool:
    return any(path.is_relative_to(r) for r in roots)


def _mount_script(hide: list[Path], private: list[Path], expose: list[Path], limits: SandboxLimits, drop: bool,
                  stage: Path, uid: int) -> str:
    """Runs as root inside the new namespaces; it stays the namespace's init so the command is not PID 1
    (PID 1 ignores default-action signals such as SIGXCPU and a test's own SIGTERM).

    private: the directories that get a fresh tmpfs, /tmp first; expose: what must be put back over the covers."""
    q = shlex.quote
    tmp_size = max(4 * limits.max_file_size_bytes, 8 * _MiB)
    fresh = f"-o mode=1777,nosuid,nodev,size={tmp_size} tmpfs"
    lines = ["set -e", "umask 022", f"mount -t tmpfs -o mode=0700,size=1m tmpfs {q(str(stage))}"]
    for i, path in enumerate(expose):  # stage binds first: covering a parent makes the original unreachable
        lines += [f"mkdir {q(str(stage))}/e{i}", f"mount --bind {q(str(path))} {q(str(stage))}/e{i}"]
    # The stage sits in the sandbox root under /var/tmp: it waits in the fresh /tmp while /var/tmp is covered.
    lines += [f"mount -t tmpfs {fresh} /tmp", f"mkdir {_STAGE_IN_TMP}", f"mount --move {q(str(stage))} {_STAGE_IN_TMP}"]
    # A tree under a private directory is already hidden by its fresh tmpfs; mask the others with an empty one.
    lines += [f"mount -t tmpfs -o mode=0755,nosuid,nodev,size=1m tmpfs {q(str(path))}"
              for path in hide if not _under_any(path, private)]
    for path in private[1:]:  # mkdir: a masked parent (a var dir of /var, say) would have hidden it
        lines += [f"mkdir -p {q(str(path))}", f"mount -t tmpfs {fresh} {q(str(path))}"]
    for i, path in enumerate(expose):
        lines += [f"mkdir -p {q(str(path))}", f"mount --move {_STAGE_IN_TMP}/e{i} {q(str(path))}"]
    run = shlex.join(_setpriv(uid)) + ' "$@"' if drop else '"$@"'
    lines += [f"umount {_STAGE_IN_TMP}", f"rmdir {_STAGE_IN_TMP}", "set +e", run, "exit $?"]
    return "\n".join(lines)


def _describe(namespaces: bool, hide: list[Path], private: list[Path], drop: bool, uid: int) -> str:
    if namespaces:
        masked = " ".join(str(p) for p in hide)
        fresh = " ".join(str(p) for p in private)
        parts = ["netns+pidns+mountns", f"private tmpfs {fresh}" + (f", masked {masked}" if masked else "")]
    else:
        parts = ["no namespaces (unshare unavailable): network NOT isolated, host /tmp, process-group kill + /proc sweep"]
    if drop:
        parts.append(f"uid {uid}")
    elif os.geteuid() == 0:
        parts.append("uid 0 NOT dropped (setpriv missing or interpreter unreachable for uid 65534; nproc not enforced)")
    else:
        parts.append(f"uid {os.geteuid()} (not root: no privilege drop)")
    if not (namespaces or drop):
        parts.append("UNISOLATED: allowed by AITEAM_SANDBOX_ALLOW_UNISOLATED")
    parts += ["rlimits cpu/as/nproc/fsize/core", "clean env"]
    return ", ".join(parts)
