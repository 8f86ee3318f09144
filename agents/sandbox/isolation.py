"""How a test command is wrapped so that untrusted generated code cannot hurt the host.

Layers, each applied only where the host allows it (probed once per process):

- **Namespaces** (``unshare``, needs root or CAP_SYS_ADMIN): a new network namespace (only a
  loopback that is down, so nothing, not even 127.0.0.1 on the host, is reachable), a PID
  namespace with ``--kill-child`` (when the wrapper dies the namespace's init dies and the
  kernel kills every process in it, daemonized grandchildren included) and a mount
  namespace in which a small ``sh`` script, still as root, mounts a private tmpfs on /tmp
  (writes there vanish with the run) and masks with an empty tmpfs the aiteam source tree
  (it holds the app's database and configuration) and any directory the unprivileged uid
  cannot traverse (here /root, which holds the pyenv interpreter), then bind-mounts back
  only what the run needs: the venv, the interpreter's prefix and the scratch directory.
- **Privilege drop** (root + ``setpriv``): the command runs as uid/gid 65534 with no
  groups, no capabilities and no-new-privs. Root-owned directories (the project tree, the
  sandbox root, the copied source) are then read-only to it, and RLIMIT_NPROC is enforced
  (the kernel does not enforce it for root).
- **rlimits** (always): CPU seconds, address space, processes, file size, no core files.
  Set in the child before exec, inherited by everything it starts.
- **Environment** (always): built from scratch; nothing of the worker's (API keys,
  DATABASE_URL, ...) is inherited.

Where a mechanism is missing the run still happens and ``Wrapped.description`` says so:

- No ``unshare`` (not root, or a seccomp profile forbids it): the network is NOT isolated,
  /tmp and the project tree are the host's, and the process tree is killed through its
  process group plus a sweep of /proc for processes carrying the run's marker variable
  (best effort: a process that re-execs with an empty environment in a new session escapes).
- Not root: no privilege drop; the code can write wherever the worker's user can, and
  RLIMIT_NPROC counts all of that user's processes.
- Root without namespaces and an interpreter that uid 65534 cannot reach: the privilege
  drop is skipped (the interpreter would not start) and the code runs as root with rlimits
  only. Deploy with a world-readable interpreter (or allow ``unshare``) to avoid this.

Known limits even with everything available: world-readable host files outside the masked
trees (/etc, /usr, other checkouts) stay readable; the venv, the interpreter and the sandbox
root must not live under /tmp (the private tmpfs would hide them); all concurrent runs share
uid 65534 and so one RLIMIT_NPROC budget (a fork bomb in one run can make another's forks
fail until it is killed); disk use of the scratch dir is bounded per file, not in total.
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

SANDBOX_UID = 65534  # nobody/nogroup on Debian; owns no files, so it can write only where we let it
RUN_MARKER = "AITEAM_SANDBOX_RUN"  # env variable that identifies a run's processes for the /proc sweep
_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"  # where unshare, setpriv, mount and sh are looked up, by us and by the run
_NAMESPACES = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--net", "--propagation", "private"]
_SETPRIV = ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups",
            "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"]
_GiB = 1024**3
_MiB = 1024**2


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 60.0  # wall clock for the whole run
    cpu_s: int = 60  # per process
    memory_bytes: int = 1 * _GiB  # address space per process (RLIMIT_AS)
    max_processes: int = 64  # processes of the sandbox uid (RLIMIT_NPROC)
    max_file_size_bytes: int = 16 * _MiB  # also bounds the output log and the junit report
    max_output_chars: int = 20_000  # tail of stdout+stderr kept in the report


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


def wrap(command: list[str], *, scratch: Path, limits: SandboxLimits) -> Wrapped:
    namespaces = namespaces_available()
    interpreter = _interpreter_paths()
    expose = _outermost([*interpreter, scratch])
    hide = _hidden_paths(expose) if namespaces else []
    # The scratch dir itself belongs to the sandbox uid; everything else must be passable by "others".
    reachable = all(_traversable(p) for p in interpreter) and (namespaces or not _blocked_ancestors(expose))
    drop = os.geteuid() == 0 and shutil.which("setpriv", path=_SYSTEM_PATH) is not None and reachable
    if namespaces:
        # Anything the run needs from under /tmp (a checkout there, say) or from a masked tree is staged first
        # on a private tmpfs outside /tmp, then moved back into place over the fresh /tmp and the masks.
        stage = scratch.parent / ".stage"
        stage.mkdir(mode=0o700, exist_ok=True)
        covered = [*hide, Path("/tmp")]
        script = _mount_script(hide, [p for p in expose if _under_any(p, covered)], limits, drop, stage)
        argv = [*_NAMESPACES, "--", "sh", "-c", script, "sandbox", *command]
    else:
        argv = [*_SETPRIV, *command] if drop else list(command)
    return Wrapped(argv, _describe(namespaces, hide, drop), drop)


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
        # The venv's plugins (pytest-django, playwright, ...) are aiteam's, not the generated
        # project's; loading them made results depend on them and cost ~1.3 s a run.
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
    hide = _blocked_ancestors(expose)
    source_tree = Path(__file__).resolve().parents[2]  # the checkout holding agents/; inside site-packages when installed
    inside_needed = any(source_tree.is_relative_to(p) for p in expose)
    if not inside_needed and not Path("/tmp").is_relative_to(source_tree):  # never mask / or a parent of /tmp
        hide.append(source_tree)
    return _outermost(hide)


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


def _mount_script(hide: list[Path], expose: list[Path], limits: SandboxLimits, drop: bool, stage: Path) -> str:
    """Runs as root inside the new namespaces; it stays the namespace's init so the command is not PID 1
    (PID 1 ignores default-action signals such as SIGXCPU and a test's own SIGTERM)."""
    q = shlex.quote
    tmp_size = max(4 * limits.max_file_size_bytes, 8 * _MiB)
    staged = q(str(stage))
    lines = ["set -e", "umask 022", f"mount -t tmpfs -o mode=0700,size=1m tmpfs {staged}"]
    for i, path in enumerate(expose):  # stage binds first: masking a parent makes the original unreachable
        lines += [f"mkdir {staged}/e{i}", f"mount --bind {q(str(path))} {staged}/e{i}"]
    lines.append(f"mount -t tmpfs -o mode=1777,nosuid,nodev,size={tmp_size} tmpfs /tmp")
    # A tree under /tmp is already hidden by the fresh /tmp; mask the others with an empty tmpfs.
    lines += [f"mount -t tmpfs -o mode=0755,nosuid,nodev,size=1m tmpfs {q(str(path))}"
              for path in hide if not path.is_relative_to("/tmp")]
    for i, path in enumerate(expose):
        lines += [f"mkdir -p {q(str(path))}", f"mount --move {staged}/e{i} {q(str(path))}"]
    run = shlex.join(_SETPRIV) + ' "$@"' if drop else '"$@"'
    lines += ["set +e", run, "exit $?"]
    return "\n".join(lines)


def _describe(namespaces: bool, hide: list[Path], drop: bool) -> str:
    if namespaces:
        masked = " ".join(str(p) for p in hide)
        parts = ["netns+pidns+mountns", "private tmpfs /tmp" + (f", masked {masked}" if masked else "")]
    else:
        parts = ["no namespaces (unshare unavailable): network NOT isolated, host /tmp, process-group kill + /proc sweep"]
    if drop:
        parts.append(f"uid {SANDBOX_UID}")
    elif os.geteuid() == 0:
        parts.append("uid 0 NOT dropped (setpriv missing or interpreter unreachable for uid 65534; nproc not enforced)")
    else:
        parts.append(f"uid {os.geteuid()} (not root: no privilege drop)")
    parts += ["rlimits cpu/as/nproc/fsize/core", "clean env"]
    return ", ".join(parts)
