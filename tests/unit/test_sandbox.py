"""The sandbox runner against hostile generated projects.

Each test writes a tiny project (a module and a test file) into tmp_path and runs it with
small limits, so every hostile case ends within a few seconds. No database is needed.
"""
from __future__ import annotations

import multiprocessing
import os
import re
import secrets
import socket
import textwrap
import time
from pathlib import Path

import pytest

from agents.sandbox import SandboxLimits, TestReport, bwrap_available, empty_trash, run_tests, sandbox_root, slots
from agents.sandbox.isolation import SandboxUnavailable, wrap

# One xdist worker runs every test of both sandbox modules, one at a time: they load the machine with fork
# bombs and runaway processes (each run has a uid of its own, so other runs are not starved: tested below).
pytestmark = pytest.mark.xdist_group("sandbox_uid")
SMALL = SandboxLimits(timeout_s=3, cpu_s=10, memory_bytes=512 * 1024**2, max_processes=32, max_output_chars=4000)
PROJECT_TREE = Path(__file__).resolve().parents[2]


def _drops_privileges() -> bool:
    try:  # a scratch dir in the sandbox root: wrap writes the run's /etc/hosts where real runs have it
        return wrap(["true"], scratch=sandbox_root() / "probe", limits=SMALL).drops_privileges
    except SandboxUnavailable:
        return False


needs_drop = pytest.mark.skipif(
    not _drops_privileges(),
    reason="the runner cannot drop to an unprivileged uid here (not root, no setpriv, or interpreter unreachable)",
)
needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap unavailable here (not installed, or not root)")


@pytest.fixture(autouse=True)
def _unisolated_runs_allowed(settings):
    """These tests check each layer where the host has it; the refusal of a run with none is
    tests/unit/test_sandbox_isolation.py's. Without this a non-root machine could run none of them."""
    settings.AITEAM_SANDBOX_ALLOW_UNISOLATED = True


def _project(tmp_path: Path, tests: str, module: str = "def add(a, b):\n    return a + b\n") -> Path:
    source = tmp_path / "generated"
    source.mkdir()
    (source / "calc.py").write_text(module)
    (source / "test_calc.py").write_text(textwrap.dedent(tests))
    return source


def _run(source: Path, limits: SandboxLimits = SMALL) -> tuple[TestReport, float]:
    started = time.monotonic()
    report = run_tests(source, limits=limits)
    return report, time.monotonic() - started


def _processes(cmdline_prefix: bytes) -> set[int]:
    """Any uid: a process that escaped the privilege drop must be found too. Matched by a per-test unique
    command line, because other sandbox runs may be going on concurrently."""
    found = set()
    for entry in os.scandir("/proc"):
        try:
            if entry.name.isdigit() and Path(entry.path, "cmdline").read_bytes().startswith(cmdline_prefix):
                found.add(int(entry.name))
        except OSError:
            continue
    return found


def _eventually_none(cmdline_prefix: bytes) -> set[int]:
    deadline = time.monotonic() + 2
    while (left := _processes(cmdline_prefix)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_a_passing_project_is_ok(tmp_path):
    source = _project(tmp_path, """
        from calc import add

        def test_adds():
            assert add(1, 2) == 3

        def test_adds_negatives():
            assert add(-1, -2) == -3
    """)

    report, _ = _run(source)

    assert report.ok, report.output_tail
    assert (report.passed, report.failed, report.errors, report.failing_tests) == (2, 0, 0, [])
    assert report.exit_code == 0 and report.duration_s > 0 and report.coverage_percent is None


def test_a_tests_own_python_imports_the_project_and_the_hosts_time_zone_is_there(tmp_path):
    """As in a plain run of an installed project: a child python finds the project's code (PYTHONPATH), and local
    time is the host's (/etc/localtime, a link where the host has one)."""
    zone = os.readlink("/etc/localtime") if os.path.islink("/etc/localtime") else None
    source = _project(tmp_path, f"""
        import os
        import subprocess
        import sys
        import time

        def test_a_child_imports_calc():
            child = subprocess.run([sys.executable, "-c", "import calc; print(calc.add(1, 2))"], capture_output=True)
            assert child.stdout == b"3\\n", child.stderr

        def test_local_time_is_the_hosts():
            assert os.path.isfile("/etc/localtime")
            assert (os.readlink("/etc/localtime") if os.path.islink("/etc/localtime") else None) == {zone!r}
            assert time.tzname == {time.tzname!r}
    """)

    report, _ = _run(source)

    assert report.ok and report.passed == 2, report.output_tail


def test_a_finished_runs_copy_is_out_of_reach_at_once_and_removed_with_the_trash(tmp_path):
    """The scratch copy moves into a root-only directory when the run ends; a worker removes it after the step."""
    token = secrets.token_hex(6)
    source = _project(tmp_path, f"""
        import os

        def test_leaves_a_file():
            open(os.environ["HOME"] + "/left-{token}", "w").close()
    """)
    report, _ = _run(source)
    root = sandbox_root()
    trash = root / "trash"
    assert report.ok, report.output_tail
    assert not any(root.glob(f"run-*/left-{token}"))
    assert trash.stat().st_mode & 0o777 == 0o700 and trash.stat().st_uid == os.geteuid()
    empty_trash()
    assert not any(trash.glob(f"*/left-{token}"))


def test_failing_tests_are_counted_and_named(tmp_path):
    source = _project(tmp_path, """
        from calc import add

        def test_adds():
            assert add(1, 2) == 3

        def test_wrong_sum():
            assert add(1, 1) == 3

        class TestEdges:
            def test_wrong_again(self):
                assert add(0, 0) == 1
    """)

    report, _ = _run(source)

    assert not report.ok
    assert (report.passed, report.failed) == (1, 2)
    assert report.failing_tests == ["test_calc.py::test_wrong_sum", "test_calc.py::TestEdges::test_wrong_again"]
    assert "assert 2 == 3" in report.output_tail


@pytest.mark.parametrize("config,name", [
    ('[pytest]\naddopts = -k "not wrong"\n', "pytest.ini"),
    ("[tool:pytest]\naddopts = --ignore=test_calc.py\n", "setup.cfg"),
    ('[tool.pytest.ini_options]\ntestpaths = ["nowhere"]\n', "pyproject.toml"),
])
def test_a_projects_own_pytest_configuration_cannot_drop_tests(tmp_path, config, name):
    source = _project(tmp_path, """
        from calc import add

        def test_adds():
            assert add(1, 2) == 3

        def test_wrong_sum():
            assert add(1, 1) == 3
    """)
    (source / name).write_text(config)

    report, _ = _run(source)

    assert (report.passed, report.failed) == (1, 1), report.output_tail
    assert report.tests_run == ["test_calc.py::test_adds", "test_calc.py::test_wrong_sum"]


def test_a_project_module_named_pytest_does_not_replace_the_runner(tmp_path):
    source = _project(tmp_path, """
        def test_wrong_sum():
            assert 1 + 1 == 3
    """)
    (source / "pytest.py").write_text("raise SystemExit(0)  # 'all passed'\n")

    report, _ = _run(source)

    assert (report.passed, report.failed) == (0, 1), report.output_tail


def test_a_src_layout_imports_without_configuration(tmp_path):
    source = _project(tmp_path, """
        from calc import add

        def test_adds():
            assert add(1, 2) == 3
    """)
    (source / "src").mkdir()
    (source / "calc.py").rename(source / "src" / "calc.py")

    report, _ = _run(source)

    assert report.ok and report.passed == 1, report.output_tail


def test_a_package_named_src_stays_a_package_and_shadows_nothing(tmp_path):
    source = _project(tmp_path, """
        from concurrent.futures import ThreadPoolExecutor

        from src.queue import size

        def test_size():
            with ThreadPoolExecutor(1) as pool:  # imports the standard library's queue
                assert pool.submit(size).result() == 0
    """)
    (source / "src").mkdir()
    (source / "src" / "__init__.py").write_text("")
    (source / "src" / "queue.py").write_text("def size():\n    return 0\n")

    report, _ = _run(source)

    assert report.ok and report.passed == 1, report.output_tail


def test_a_syntax_error_is_a_failed_report_not_an_exception(tmp_path):
    source = _project(tmp_path, "from calc import add\n\ndef test_adds():\n    assert add(1, 2) == 3\n", module="def add(a, b)\n")

    report, _ = _run(source)

    assert not report.ok
    assert report.errors >= 1 and report.exit_code != 0
    assert report.failing_tests == ["test_calc.py"]
    assert "SyntaxError" in report.output_tail


def test_an_infinite_loop_is_killed_at_the_wall_clock_timeout(tmp_path):
    source = _project(tmp_path, "def test_spins():\n    while True:\n        pass\n")

    report, elapsed = _run(source)

    assert report.timed_out and report.killed_reason == "timeout" and not report.ok
    assert elapsed < SMALL.timeout_s + 3


def test_the_cpu_limit_kills_a_busy_process_before_the_timeout(tmp_path):
    source = _project(tmp_path, "def test_spins():\n    while True:\n        pass\n")

    report, elapsed = _run(source, SandboxLimits(timeout_s=20, cpu_s=1))

    assert not report.timed_out and report.killed_reason == "cpu" and not report.ok
    assert elapsed < 5


def test_a_4gb_allocation_fails_with_memory_error(tmp_path):
    source = _project(tmp_path, "def test_allocates():\n    b = bytearray(4 * 1024**3)\n    assert b\n")

    report, elapsed = _run(source)

    assert (report.failed, report.failing_tests) == (1, ["test_calc.py::test_allocates"])
    assert "MemoryError" in report.output_tail
    assert elapsed < 5


def test_the_file_size_limit_refuses_big_writes(tmp_path):
    source = _project(tmp_path, """
        import errno
        from pathlib import Path

        import pytest

        def test_writes_two_mib():
            with pytest.raises(OSError) as refused:
                Path("big.bin").write_bytes(b"0" * 2 * 1024**2)
            assert refused.value.errno == errno.EFBIG
    """)

    report, _ = _run(source, SandboxLimits(timeout_s=10, max_file_size_bytes=1024**2))

    assert report.ok, report.output_tail


@needs_drop
def test_the_process_limit_holds_for_the_runs_uid(tmp_path):
    source = _project(tmp_path, """
        import os
        import signal
        import time

        def test_forks_until_refused():
            children, refusal = [], None
            try:
                for _ in range(200):
                    pid = os.fork()
                    if pid == 0:
                        try:
                            time.sleep(30)
                        finally:
                            os._exit(0)
                    children.append(pid)
            except OSError as error:
                refusal = error
            for pid in children:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            assert isinstance(refusal, BlockingIOError), refusal
            assert len(children) < 32, len(children)
    """)

    report, _ = _run(source)

    assert report.ok, report.output_tail
    assert re.search(rf"uid {slots.FIRST_UID // 1000}\d{{3}}\b", report.isolation), report.isolation


def _bomb_in_the_background(tmp_path: Path) -> multiprocessing.Process:
    """A run that forks until refused and holds its children for seconds, in a process of its own."""
    source = _project(tmp_path / "bomb", """
        import os
        import time

        def test_holds_every_process_it_may_have():
            children = []
            try:
                while True:
                    pid = os.fork()
                    if pid == 0:
                        time.sleep(8)
                        os._exit(0)
                    children.append(pid)
            except OSError:
                time.sleep(6)
    """)
    bomb = multiprocessing.get_context("fork").Process(
        target=run_tests, args=(source,), kwargs={"limits": SandboxLimits(timeout_s=10, max_processes=32)})
    bomb.start()
    return bomb


@needs_drop
def test_a_fork_bomb_in_one_run_does_not_fail_a_concurrent_run(tmp_path):
    (tmp_path / "bomb").mkdir()
    bomb = _bomb_in_the_background(tmp_path)
    try:
        time.sleep(2)  # the bomb has taken its whole process budget by now
        source = _project(tmp_path, """
            import subprocess
            import sys

            def test_starts_a_few_processes():
                for _ in range(5):
                    subprocess.run([sys.executable, "-c", "pass"], check=True)
        """)
        report, _ = _run(source, SandboxLimits(timeout_s=10, max_processes=32))
        assert report.ok and report.passed == 1, report.output_tail
    finally:
        bomb.join(timeout=20)
        if bomb.is_alive():
            bomb.kill()


@needs_drop
def test_a_fork_bomb_is_contained_and_leaves_nothing_behind(tmp_path):
    name = f"bomb-{secrets.token_hex(4)}"  # every bomb process carries it as argv[0], so we can look for survivors
    source = _project(tmp_path, """
        import os
        import sys

        BOMB = "import os\\nwhile True:\\n    try:\\n        os.fork()\\n    except OSError:\\n        pass\\n"

        def test_bombs():
            while True:
                try:
                    if os.fork() == 0:
                        os.execv(sys.executable, ["NAME", "-c", BOMB])
                except OSError:
                    pass
    """.replace("NAME", name))

    report, elapsed = _run(source)

    assert not report.ok and (report.timed_out or report.failed)
    assert elapsed < SMALL.timeout_s + 3
    assert _eventually_none(name.encode()) == set()


def test_a_daemonized_grandchild_holding_the_output_neither_blocks_nor_survives(tmp_path):
    seconds = f"600.{secrets.randbelow(10**6)}"  # "sleep 600", made unique so no other process matches
    source = _project(tmp_path, """
        import os
        import subprocess

        def _open(fd):
            try:
                os.fstat(fd)
                return True
            except OSError:
                return False

        def test_leaves_a_daemon_behind():
            # pytest's saved copies of the real stdout/stderr are non-inheritable fds > 2: pass them on.
            held = [fd for fd in range(3, 256) if _open(fd)]
            subprocess.Popen(["sleep", "SECONDS"], start_new_session=True, pass_fds=held)
    """.replace("SECONDS", seconds))

    report, elapsed = _run(source)

    assert report.ok, report.output_tail
    assert elapsed < 5
    assert _eventually_none(f"sleep\x00{seconds}\x00".encode()) == set()


@needs_bwrap
def test_the_network_is_unreachable_even_on_loopback(tmp_path):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # reachable from here, so a refusal is the sandbox
        source = _project(tmp_path, f"""
            import socket

            import pytest

            def test_cannot_reach_a_listener_on_the_hosts_loopback():
                with pytest.raises(OSError):
                    socket.create_connection(("127.0.0.1", {port}), timeout=2)

            def test_cannot_reach_the_outside():
                with pytest.raises(OSError):
                    socket.create_connection(("1.1.1.1", 53), timeout=2)
        """)

        report, _ = _run(source)

    assert report.ok and report.passed == 2, report.output_tail
    assert "netns" in report.isolation


@needs_bwrap
def test_a_test_may_serve_and_connect_on_its_own_localhost(tmp_path):
    source = _project(tmp_path, """
        import socket
        import threading

        def test_echoes_over_localhost():
            with socket.create_server(("localhost", 0)) as server:
                port = server.getsockname()[1]
                threading.Thread(target=lambda: server.accept()[0].sendall(b"pong"), daemon=True).start()
                with socket.create_connection(("localhost", port), timeout=2) as client:
                    assert client.recv(4) == b"pong"
    """)

    report, _ = _run(source)

    assert report.ok and report.passed == 1, report.output_tail


def test_secrets_in_the_workers_environment_are_not_inherited(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-canary-sandbox")
    monkeypatch.setenv("DATABASE_URL", "postgres://canary-sandbox@db/aiteam")
    source = _project(tmp_path, """
        import os

        def test_sees_no_secrets():
            assert "ANTHROPIC_API_KEY" not in os.environ
            assert "DATABASE_URL" not in os.environ
            assert not [k for k, v in os.environ.items() if "canary-sandbox" in v]
            assert os.environ["HOME"] == os.getcwd()
    """)

    report, _ = _run(source)

    assert report.ok and report.passed == 1, report.output_tail


@needs_drop
def test_writes_outside_the_scratch_dir_are_refused(tmp_path):
    token = secrets.token_hex(4)
    source = tmp_path / "generated"
    targets = {
        "scratch_parent": sandbox_root() / f"escape-{token}.txt",
        "copied_source": source / f"escape-{token}.txt",
        "project_tree": PROJECT_TREE / f"escape-{token}.txt",
    }
    # Under bubblewrap the copied source (under the host's /tmp) and the project tree are not there at all; with the
    # uid drop alone they are there and root's.
    either = "(PermissionError, FileNotFoundError)"
    _project(tmp_path, f"""
        from pathlib import Path

        import pytest

        @pytest.mark.parametrize("path, error", [
            (Path.cwd().parent / "escape-{token}.txt", PermissionError),
            (Path("{targets['copied_source']}"), {either}),
            (Path("{targets['project_tree']}"), {either}),
        ])
        def test_cannot_write_outside(path, error):
            with pytest.raises(error):
                path.write_text("escaped")

        def test_can_write_its_own_scratch_dir():
            Path("mine.txt").write_text("fine")
    """)

    report, _ = _run(source)

    escaped = [name for name, path in targets.items() if path.exists()]
    for name in escaped:
        targets[name].unlink()
    assert escaped == []
    assert report.ok and report.passed == 4, report.output_tail


@needs_bwrap
def test_the_project_tree_is_masked_and_tmp_is_private(tmp_path):
    probe = Path("/tmp") / f"aiteam-sandbox-probe-{secrets.token_hex(4)}"
    source = _project(tmp_path, f"""
        from pathlib import Path

        import pytest

        def test_writes_to_tmp():
            Path("{probe}").write_text("inside")
            assert Path("{probe}").read_text() == "inside"

        def test_cannot_read_the_project_tree():
            with pytest.raises(FileNotFoundError):
                Path("{PROJECT_TREE / 'pyproject.toml'}").read_text()
    """)

    report, _ = _run(source)

    leaked = probe.exists()
    probe.unlink(missing_ok=True)
    assert not leaked
    assert report.ok and report.passed == 2, report.output_tail


def test_large_output_is_truncated_to_a_marked_tail(tmp_path):
    source = _project(tmp_path, "def test_shouts():\n    print('x' * 1_000_000)\n    assert False, 'the end'\n")

    report, _ = _run(source, SandboxLimits(timeout_s=10, max_output_chars=2000))

    assert report.failed == 1
    assert len(report.output_tail) <= 2000
    assert report.output_tail.startswith("[... output truncated")
    assert "1 failed in" in report.output_tail[-200:]  # the tail is kept, the head dropped


def test_a_report_symlinked_to_a_device_is_ignored(tmp_path):
    source = _project(tmp_path, """
        import os

        def test_swaps_the_report():
            os.symlink("/dev/zero", ".report.xml")
    """)

    report, elapsed = _run(source)

    assert not report.ok and report.tampered == ["the junit report is missing or unreadable though pytest ended its session"]
    assert elapsed < 5


def test_the_report_round_trips_through_json():
    report = TestReport(passed=3, failed=1, failing_tests=["test_x.py::test_y"], duration_s=1.5, exit_code=1,
                        output_tail="boom", isolation="netns")

    data = report.to_dict()

    assert data["ok"] is False
    assert TestReport.from_dict(data) == report


def test_an_interrupted_worker_still_kills_the_run(tmp_path, monkeypatch):
    seconds = f"600.{secrets.randbelow(10**6)}"
    source = _project(tmp_path, f"import subprocess\n\ndef test_waits():\n    subprocess.run(['sleep', '{seconds}'])\n")

    def interrupted(pid: int, timeout_s: float) -> bool:
        time.sleep(1.0)  # long enough for the sleep to start
        raise KeyboardInterrupt  # what a Celery soft time limit or a shutdown looks like from here

    monkeypatch.setattr("agents.sandbox.runner._wait_unreaped", interrupted)

    with pytest.raises(KeyboardInterrupt):
        run_tests(source, limits=SMALL)

    assert _eventually_none(f"sleep\x00{seconds}\x00".encode()) == set()
