"""What a test run may reach beyond its own scratch dir: the user site-packages, the host's shared
writable directories, host files outside the allow-list (other tenants' data among them), and a host that
cannot isolate it at all.

The runs are real sandbox runs of a tiny project (as in test_sandbox.py); no database is needed.
"""
from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from agents.sandbox import SandboxLimits, bwrap_available, run_tests
from agents.sandbox.isolation import SandboxUnavailable
from agents.sandbox.runner import default_command
from agents.schemas.engineering import EngineerOutput
from lifecycle.failure_rules import Failure, Route, Source, classify, error_classes

# One xdist worker runs every test of both sandbox modules, one at a time: they load the machine with fork
# bombs and runaway processes (test_sandbox.py shows a concurrent run is not starved by them).
pytestmark = pytest.mark.xdist_group("sandbox_uid")
SMALL = SandboxLimits(timeout_s=10, cpu_s=10, memory_bytes=512 * 1024**2, max_processes=32, max_output_chars=4000)
PYTHON_VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"
# A system interpreter, not the venv's: a venv turns the user site off by itself, a Docker image's python does not.
SYSTEM_PYTHON = Path(sys.base_prefix) / "bin" / PYTHON_VERSION
needs_system_python = pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason=f"no {SYSTEM_PYTHON}")
needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap unavailable here (not installed, or not root)")
FORGED_PASS = """\
import pathlib, sys
pathlib.Path(".report.xml").write_text('<testsuite><testcase classname="forged" name="test_all_good"/></testsuite>')
sys.exit(0)
"""


def _project(tmp_path: Path, tests: str) -> Path:
    source = tmp_path / "generated"
    source.mkdir()
    (source / "test_it.py").write_text(textwrap.dedent(tests))
    return source


@pytest.mark.parametrize("path", [f".local/lib/{PYTHON_VERSION}/site-packages/pytest.py", ".local/bin/pytest.py",
                                  "lib/site-packages/coverage.py", "vendor/dist-packages/pluggy.py"])
def test_an_engineer_may_not_write_where_python_finds_modules_on_its_own(path):
    with pytest.raises(ValidationError, match="could change how tests run"):
        EngineerOutput(reasoning="x", files=[{"path": path, "content": "x"}])


@pytest.mark.parametrize("path", [".pre-commit-config.yaml", ".devcontainer/devcontainer.json", "docs/.local.md",
                                  "readinglist/site.py"])
def test_other_dot_paths_and_look_alikes_stay_writable(path):
    assert EngineerOutput(reasoning="x", files=[{"path": path, "content": "x"}]).files[0].path == path


@needs_system_python
def test_the_default_command_starts_python_without_the_user_site(tmp_path):
    user_site = tmp_path / ".local" / "lib" / PYTHON_VERSION / "site-packages"
    user_site.mkdir(parents=True)
    command = default_command(tmp_path)
    flags = command[1:command.index("-m")]
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}  # no PYTHONNOUSERSITE: the flags alone must do it

    out = subprocess.run([str(SYSTEM_PYTHON), *flags, "-c", "import site, sys; print(site.ENABLE_USER_SITE, sys.path)"],
                         env=env, capture_output=True, text=True, check=True).stdout

    assert out.startswith("False") and str(user_site) not in out


@needs_system_python
def test_a_fake_pytest_in_the_user_site_cannot_forge_a_pass(tmp_path):
    source = _project(tmp_path, "def test_wrong_sum():\n    assert 1 + 1 == 3\n")
    fake = source / ".local" / "lib" / PYTHON_VERSION / "site-packages" / "pytest.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(FORGED_PASS)
    # Without -s, as a CI workflow's own `python -m pytest` is run (agents.ci_config.sandbox_command): only the
    # sandbox's environment keeps the user site off.
    command = [str(SYSTEM_PYTHON), "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=.report.xml"]

    report = run_tests(source, limits=SMALL, command=command)

    assert "forged::test_all_good" not in report.tests_run and not report.ok, report.output_tail


@needs_bwrap
def test_files_written_to_the_hosts_shared_writable_dirs_do_not_outlive_the_run(tmp_path):
    name = f"aiteam-sandbox-probe-{secrets.token_hex(4)}"
    shared = [Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")]
    source = _project(tmp_path, f"""
        from pathlib import Path

        import pytest

        @pytest.mark.parametrize("directory", {[str(d) for d in shared]!r})
        def test_writes_there(directory):
            (Path(directory) / "{name}").write_text("left behind")
            assert (Path(directory) / "{name}").read_text() == "left behind"
    """)

    report = run_tests(source, limits=SMALL)

    left = [d / name for d in shared if (d / name).exists()]
    for path in left:
        path.unlink()
    assert left == []
    assert report.ok and report.passed == len(shared), report.output_tail


@pytest.fixture
def another_checkout():
    """A world-readable tree outside the allow-list, like another tenant's checkout or a var dir nobody masked."""
    top = Path("/var/lib") / f"aiteam-sandbox-test-{secrets.token_hex(4)}"
    other = top / "other-tenant"
    other.mkdir(parents=True)
    for directory in (top, other):
        directory.chmod(0o755)
    canary = f"API_KEY = 'other-tenant-{secrets.token_hex(8)}'\n"
    (other / "secret.py").write_text(canary)
    (other / "secret.py").chmod(0o644)
    yield other / "secret.py", canary
    shutil.rmtree(top)


def _host_only_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if len(line) > 8 and not line.startswith("#")]


@needs_bwrap
def test_host_files_outside_the_allow_list_cannot_be_read_nor_echoed(tmp_path, another_checkout):
    secret, canary = another_checkout
    source = _project(tmp_path, f"""
        from pathlib import Path

        import pytest

        @pytest.mark.parametrize("path", ["/etc/passwd", "/etc/group", "/etc/hostname", "{secret}", "{secret.parent}",
                                          "/proc/1/environ"])
        def test_cannot_read(path):
            try:
                found = Path(path).read_bytes() if not Path(path).is_dir() else repr(list(Path(path).iterdir()))
            except (FileNotFoundError, PermissionError) as refused:
                print("refused:", path, type(refused).__name__)
                return
            print(found)  # into the output tail, where the tenant would read it
            pytest.fail(path + " was readable")
    """)

    report = run_tests(source, limits=SMALL)

    assert report.ok and report.passed == 6, report.output_tail
    leaked = [line for line in _host_only_lines(Path("/etc/passwd")) if line in report.output_tail]
    assert leaked == [] and canary.strip() not in report.output_tail


CAPABILITIES_PROBE = """
    import os
    import subprocess
    from pathlib import Path

    import pytest

    STATUS = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())

    @pytest.mark.parametrize("field", ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"])
    def test_holds_no_capability(field):
        assert int(STATUS[field], 16) == 0

    def test_cannot_gain_privileges():
        assert STATUS["NoNewPrivs"].strip() == "1"

    def test_a_program_it_starts_holds_none_either():
        out = subprocess.run(["grep", "-E", "^Cap(Prm|Eff)", "/proc/self/status"], capture_output=True, text=True)
        assert [int(line.split()[1], 16) for line in out.stdout.splitlines()] == [0, 0]

    def test_cannot_write_the_interpreter():
        with pytest.raises(OSError):
            (Path(os.__file__).parent / "planted.py").write_text("")
"""


@needs_bwrap
def test_a_run_ends_with_its_slots_uid_no_capabilities_and_no_new_privileges(tmp_path):
    source = _project(tmp_path, CAPABILITIES_PROBE + """
    def test_runs_as_a_run_slot_uid():
        assert os.getuid() >= 200_000 and os.getgid() == os.getuid() and os.getgroups() in ([], [os.getgid()])
    """)

    report = run_tests(source, limits=SMALL)

    assert report.ok and report.passed == 9, report.output_tail


@needs_bwrap
def test_without_the_uid_drop_bubblewrap_still_drops_every_capability(tmp_path, settings, monkeypatch):
    """setpriv missing or an interpreter the run's uid cannot reach: the command stays uid 0 inside, powerless (the
    bounding set stays, but bwrap's no-new-privs and securebits keep a uid 0 exec from regaining anything)."""
    monkeypatch.setattr("agents.sandbox.isolation.can_drop_privileges", lambda *args, **kwargs: False)
    source = _project(tmp_path, CAPABILITIES_PROBE.replace(', "CapBnd"', ""))

    report = run_tests(source, limits=SMALL)

    assert report.ok and report.passed == 7, report.output_tail
    assert "capabilities dropped" in report.isolation


@pytest.fixture
def no_isolation(monkeypatch):
    """A worker that is not root (the Docker image's USER aiteam): no bubblewrap, no setpriv drop."""
    monkeypatch.setattr("agents.sandbox.isolation.bwrap_available", lambda: False)
    monkeypatch.setattr("agents.sandbox.isolation.can_drop_privileges", lambda *args, **kwargs: False)


def test_a_run_with_neither_namespaces_nor_the_uid_drop_is_refused_for_an_operator(tmp_path, settings, no_isolation):
    settings.AITEAM_SANDBOX_ALLOW_UNISOLATED = False
    source = _project(tmp_path, "def test_passes():\n    pass\n")

    with pytest.raises(SandboxUnavailable, match="AITEAM_SANDBOX_ALLOW_UNISOLATED") as refused:
        run_tests(source, limits=SMALL)

    failure = Failure(source=Source.STEP, step="self_test", error_classes=error_classes(refused.value), runs_left=2)
    assert classify(failure).route == Route.OPERATOR  # not a failing test for the engineer to fix


def test_the_operator_may_allow_unisolated_runs(tmp_path, settings, no_isolation):
    settings.AITEAM_SANDBOX_ALLOW_UNISOLATED = True
    source = _project(tmp_path, "import os\n\ndef test_passes():\n    assert os.getcwd()\n")

    report = run_tests(source, limits=SMALL)

    assert report.ok and report.passed == 1, report.output_tail
    assert "UNISOLATED" in report.isolation and "netns" not in report.isolation


def test_without_bubblewrap_the_report_says_what_the_run_could_reach(tmp_path, settings, monkeypatch):
    settings.AITEAM_SANDBOX_ALLOW_UNISOLATED = True  # an interpreter under /root (pyenv) allows no drop without bwrap
    monkeypatch.setattr("agents.sandbox.isolation.bwrap_available", lambda: False)
    source = _project(tmp_path, "def test_passes():\n    pass\n")

    report = run_tests(source, limits=SMALL)

    assert report.ok and report.passed == 1, report.output_tail
    assert report.isolation.startswith("no bwrap") and "network NOT isolated, host files readable" in report.isolation
