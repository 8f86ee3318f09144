"""What a test run may reach beyond its own scratch dir: the user site-packages, the host's shared
writable directories, other tenants' data, and a host that cannot isolate it at all.

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

from agents.sandbox import SandboxLimits, namespaces_available, run_tests
from agents.sandbox.isolation import SandboxUnavailable
from agents.sandbox.runner import default_command
from agents.schemas.engineering import EngineerOutput
from lifecycle.failure_rules import Failure, Route, Source, classify, error_classes

# One xdist worker runs every test of both sandbox modules, one at a time: their runs share uid 65534's
# RLIMIT_NPROC of 32, which a fork-bomb test fills (a run started meanwhile fails to exec: EAGAIN).
pytestmark = pytest.mark.xdist_group("sandbox_uid")
SMALL = SandboxLimits(timeout_s=10, cpu_s=10, memory_bytes=512 * 1024**2, max_processes=32, max_output_chars=4000)
PYTHON_VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"
# A system interpreter, not the venv's: a venv turns the user site off by itself, a Docker image's python does not.
SYSTEM_PYTHON = Path(sys.base_prefix) / "bin" / PYTHON_VERSION
needs_system_python = pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason=f"no {SYSTEM_PYTHON}")
needs_namespaces = pytest.mark.skipif(not namespaces_available(), reason="unshare (net/pid/mount namespaces) unavailable here")
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


@needs_namespaces
def test_files_written_to_the_hosts_shared_writable_dirs_do_not_outlive_the_run(tmp_path):
    name = f"aiteam-sandbox-probe-{secrets.token_hex(4)}"
    shared = [d for d in (Path("/dev/shm"), Path("/var/tmp"), Path("/run/lock")) if d.is_dir() and not d.is_symlink()]
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
def var_dir_outside_the_checkout():
    """Like a deployment's /var/lib/aiteam: another tenant's workspace, readable by anyone but for the mask."""
    var = Path("/var/lib") / f"aiteam-sandbox-test-{secrets.token_hex(4)}"
    other = var / "workspaces" / "other-tenant"
    other.mkdir(parents=True)
    for directory in (var, var / "workspaces", other):
        directory.chmod(0o755)
    (other / "secret.py").write_text("API_KEY = 'other-tenant'\n")
    (other / "secret.py").chmod(0o644)
    yield var
    shutil.rmtree(var)


@needs_namespaces
@pytest.mark.parametrize("setting, under", [("VAR_DIR", ""), ("AITEAM_WORKSPACE_ROOT", "workspaces"),
                                            ("AITEAM_REMOTES_ROOT", "workspaces")])
def test_another_tenants_data_under_the_var_dir_is_masked(tmp_path, settings, var_dir_outside_the_checkout, setting,
                                                          under):
    setattr(settings, setting, var_dir_outside_the_checkout / under)
    other = var_dir_outside_the_checkout / "workspaces" / "other-tenant"
    source = _project(tmp_path, f"""
        import os
        from pathlib import Path

        import pytest

        def test_cannot_list_another_tenants_workspace():
            with pytest.raises(FileNotFoundError):
                os.listdir("{other}")

        def test_cannot_read_its_files():
            with pytest.raises(FileNotFoundError):
                Path("{other / 'secret.py'}").read_text()

        def test_reads_its_own_copy():
            assert "test_it.py" in os.listdir(".")
    """)

    report = run_tests(source, limits=SMALL)

    assert report.ok and report.passed == 3, report.output_tail


@pytest.fixture
def no_isolation(monkeypatch):
    """A worker that is not root (the Docker image's USER aiteam): no unshare, no setpriv drop."""
    monkeypatch.setattr("agents.sandbox.isolation.namespaces_available", lambda: False)
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
