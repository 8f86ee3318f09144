"""A run's namespaces and file system, built by bubblewrap (Debian's ``bwrap``) from an allow-list.

The run's root is an empty tmpfs. Into it go, read-only, the operating system's programs and libraries (``/usr``
and the merged-/usr links ``/bin``, ``/lib``...), the dynamic loader's cache, the interpreter's prefix and the venv;
read-write, the run's scratch copy; a private, size-bounded tmpfs on ``/tmp``, ``/var/tmp`` and ``/dev/shm``; a
minimal ``/dev`` and a ``/proc`` of the run's own PID namespace; and an ``/etc`` holding only the loader's cache,
the host's time zone (``localtime``, ``timezone``: a test of local time reads as on the host) and an ``/etc/hosts``
of our own naming localhost. Nothing else of the host exists in there: not ``/etc/passwd`` (the
run's uid has no name: ``getpass.getuser()`` needs ``USER``), not other checkouts, not every tenant's workspaces,
not other runs' scratch dirs.

bwrap runs as root without a user namespace (uid 0 inside, so it can mount), and ``setpriv`` inside then drops to
the run's uid with no groups, no capabilities and no-new-privs. bwrap itself stays the namespace's init: the
command is not PID 1 (PID 1 ignores default-action signals such as SIGXCPU and a test's own SIGTERM), and when
bwrap dies the kernel kills every process in the namespace, daemonized grandchildren included.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# New network (only its own loopback: the host's 127.0.0.1 is unreachable), PID, IPC and UTS namespaces; bwrap's
# children die with it (a killed runner leaves no run behind); --new-session: no TIOCSTI on a terminal.
_NAMESPACES = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
               "--hostname", "sandbox", "--die-with-parent", "--new-session"]
# Links on a merged-/usr system (Debian 12), directories on older ones: mirrored as the host has them.
_USR_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")  # where programs expect to write; a fresh tmpfs each, per run
_HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"


@functools.cache
def available() -> bool:
    """One probe per process: bwrap, run as root (bwrap builds the mounts; setpriv then drops), with the exact
    namespace flags and system binds of a real run."""
    if os.geteuid() != 0 or shutil.which("bwrap", path=_SYSTEM_PATH) is None:
        return False
    probe = ["bwrap", *_system(), *_NAMESPACES, "--", "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=10, env={"PATH": _SYSTEM_PATH}).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def argv(*, scratch: Path, read_only: list[Path], hosts: Path, tmp_size: int, drop_capabilities: bool) -> list[str]:
    """bwrap's arguments up to and including ``--``; the caller appends what runs inside.

    read_only: outermost directories (interpreter, venv); hosts: from ``hosts_file``."""
    made = {Path("/"), Path("/usr"), Path("/dev"), Path("/proc")}
    args = ["bwrap", *_system()]
    # The loader finds multiarch libraries (/usr/lib/x86_64-linux-gnu) only through its cache.
    args += [*_parents(Path("/etc/ld.so.cache"), made), "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    args += ["--ro-bind", str(hosts), "/etc/hosts", *_time_zone()]
    for tmp in map(Path, _PRIVATE_TMP):
        args += [*_parents(tmp, made), "--perms", "1777", "--size", str(tmp_size), "--tmpfs", str(tmp)]
        made.add(tmp)
    # Shallowest first, after the tmpfs mounts: a venv under /tmp, or the scratch dir under /var/tmp, lands on top.
    for path in sorted(read_only, key=lambda p: len(p.parts)):
        if not path.is_relative_to("/usr"):  # else already there, read-only
            args += [*_parents(path, made), "--ro-bind", str(path), str(path)]
    args += [*_parents(scratch, made), "--bind", str(scratch), str(scratch), "--chdir", str(scratch)]
    capabilities = ["--cap-drop", "ALL"] if drop_capabilities else []  # else setpriv inside needs them to drop
    return [*args, *_NAMESPACES, *capabilities, "--"]


def hosts_file(folder: Path) -> Path:
    """The run's /etc/hosts: ``localhost`` resolves (a test may serve on its own loopback), nothing of the host's
    names does. Rewritten whole (os.replace) when missing or changed, so a concurrent reader never sees it half done."""
    target = folder / "hosts"
    if not target.exists() or target.read_text() != _HOSTS:
        staged = folder / f".hosts.{os.getpid()}"
        staged.write_text(_HOSTS)
        staged.chmod(0o644)
        os.replace(staged, target)
    return target


def _system() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for link in map(Path, _USR_LINKS):
        if link.is_symlink():
            args += ["--symlink", os.readlink(link), str(link)]
        elif link.is_dir():
            args += ["--ro-bind", str(link), str(link)]
    return [*args, "--dev", "/dev", "--proc", "/proc"]


def _time_zone() -> list[str]:
    """/etc/localtime as the host has it: a link into /usr/share/zoneinfo stays a link (libraries such as tzlocal read
    the zone's name from it), any other is bound read-only; and Debian's /etc/timezone, if there is one."""
    args = ["--ro-bind-try", "/etc/timezone", "/etc/timezone"]
    target = os.path.realpath("/etc/localtime")
    if os.path.islink("/etc/localtime") and target.startswith("/usr/share/zoneinfo/") and os.path.isfile(target):
        return [*args, "--symlink", os.readlink("/etc/localtime"), "/etc/localtime"]
    return [*args, "--ro-bind-try", "/etc/localtime", "/etc/localtime"]


def _parents(path: Path, made: set[Path]) -> list[str]:
    """--dir for each missing ancestor of path, traversable: bwrap would make them 0700 and root's, which the run's
    uid cannot pass."""
    args: list[str] = []
    for parent in reversed(path.parents):
        if parent not in made:
            args += ["--perms", "0755", "--dir", str(parent)]
            made.add(parent)
    return args
