"""A repository's environment, built offline from local wheels, and its tests run in the sandbox with it.

Real venvs (pip from the worker, --no-index), real sandbox runs. Building a venv is the slow part, so each is
built once per module: one for repositories with a dependency file, one for those with none.
"""
from __future__ import annotations

import shutil
import socket
import sys
import textwrap
from pathlib import Path

import pytest

from agents.environments import (
    BadDependencies,
    InstallFailed,
    PackageSources,
    detect_test_command,
    prepare_environment,
    run_repository,
)
from agents.environments.poetry import specifier
from agents.environments.prepare import READY, _pip, installed
from agents.environments.requirements import collect_requirements, dependency_files, environment_key
from agents.environments.wheels import repack_installed, write_wheel
from agents.sandbox import SandboxLimits, bwrap_available

pytestmark = pytest.mark.xdist_group("sandbox_uid")  # with the other sandbox modules: one run at a time
LIMITS = SandboxLimits(timeout_s=60, cpu_s=30, memory_bytes=1024**3, max_output_chars=8000)
needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap unavailable here (not installed, or not root)")
SECRET = "s3cr3t-token-for-the-log-test"


def _repo(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> PackageSources:
    """No index: a wheel of a small dependency the test writes, and the worker's pytest repacked."""
    base = tmp_path_factory.mktemp("wheels")
    write_wheel(base / "deps", "tinydep", "1.0", {
        "tinydep/__init__.py": b"def double(x):\n    return 2 * x\n",
        # a pytest plugin, as pytest-django is one: the repository's tests rely on what it provides
        "tinydep/plugin.py": b"import pytest\n\n\n@pytest.fixture\ndef two():\n    return 2\n",
        "tinydep-1.0.dist-info/entry_points.txt": b"[pytest11]\ntinydep = tinydep.plugin\n"})
    write_wheel(base / "deps", "tinydep", "2.0", {"tinydep/__init__.py": b""})  # what an unpinned tinydep gets
    write_wheel(base / "deps", "unasked", "1.0", {"unasked/__init__.py": b""})  # only ever a constraint's
    repack_installed(base / "runner", ["pytest"])
    return PackageSources(find_links=(base / "deps",), runner_wheels=base / "runner")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One cache for the session's repository modules (one xdist group): a venv built by one is reused by the
    next, as on a worker."""
    return tmp_path_factory.getbasetemp() / "repo-envs"


@pytest.fixture(scope="module")
def listener():
    """A port on the host's loopback that accepts connections: the sandbox must not reach it."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


@pytest.fixture(scope="module")
def src_repo(tmp_path_factory, listener) -> Path:
    return _repo(tmp_path_factory.mktemp("src-repo"), {
        "requirements.txt": "tinydep==1.0\n",
        "pyproject.toml": """\
            [project]
            name = "calc"
            version = "0.1"
            [tool.pytest.ini_options]
            testpaths = ["tests"]
            addopts = "-x"
            """,
        "src/calc/__init__.py": "from tinydep import double\n\n\ndef quad(x):\n    return double(double(x))\n",
        "tests/test_calc.py": f"""\
            import socket
            import sys
            from pathlib import Path

            import pytest

            from calc import quad


            def test_wrong():
                assert quad(1) == 5


            def test_quad_uses_the_dependency():
                assert quad(2) == 8


            def test_uses_the_dependencys_pytest_plugin(two):
                assert quad(two) == 8


            def test_cannot_write_the_venv():
                for target in (Path(sys.prefix) / "planted", Path(sys.prefix) / "lib" / "planted.py"):
                    with pytest.raises(OSError):
                        target.write_text("x")


            def test_cannot_reach_the_hosts_loopback():
                with pytest.raises(OSError):
                    socket.create_connection(("127.0.0.1", {listener}), timeout=2)
            """,
    })


@pytest.fixture(scope="module")
def src_env(src_repo, cache, sources):
    return prepare_environment(src_repo, cache_dir=cache, sources=sources)


@pytest.fixture(scope="module")
def plain_env(tmp_path_factory, cache, sources):
    """The venv of repositories without dependency files, built over what a crashed build left behind."""
    empty = tmp_path_factory.mktemp("no-deps")
    home = cache / f"env-{environment_key(empty, [], extra=('pytest',))[:24]}"
    (home / READY).unlink(missing_ok=True)  # built already by another module, or not: either way, unfinished
    leftover = home / "venv" / "half-installed"
    leftover.parent.mkdir(parents=True, exist_ok=True)
    leftover.write_text("a build that died before writing its marker")
    return prepare_environment(empty, cache_dir=cache, sources=sources), leftover


def test_a_src_layout_repository_runs_its_tests_with_its_dependency(src_repo, src_env):
    command = detect_test_command(src_repo)

    run = run_repository(src_repo, command, src_env, limits=LIMITS)

    assert src_env.requirements == ("tinydep==1.0",) and not src_env.reused
    assert run.outcomes["tests/test_calc.py::test_quad_uses_the_dependency"] == "passed"
    assert run.outcomes["tests/test_calc.py::test_uses_the_dependencys_pytest_plugin"] == "passed"
    # addopts' -x would have stopped at test_wrong, the first test: every later test still ran
    assert run.outcomes["tests/test_calc.py::test_wrong"] == "failed" and len(run.outcomes) == 5
    assert run.report.tampered == [] and "ro /usr" in run.report.isolation


def test_the_run_cannot_write_the_venv(src_repo, src_env):
    run = run_repository(src_repo, detect_test_command(src_repo), src_env, limits=LIMITS)

    assert run.outcomes["tests/test_calc.py::test_cannot_write_the_venv"] == "passed"
    assert str(src_env.venv) in run.report.isolation  # bound: listed among the read-only paths


@needs_bwrap
def test_the_run_still_has_no_network(src_repo, src_env):
    run = run_repository(src_repo, detect_test_command(src_repo), src_env, limits=LIMITS)

    assert run.outcomes["tests/test_calc.py::test_cannot_reach_the_hosts_loopback"] == "passed"


def test_a_second_prepare_reuses_the_venv_without_installing(src_repo, src_env, cache, sources):
    log = src_env.venv.parent / "install.log"
    before = log.stat().st_mtime_ns

    again = prepare_environment(src_repo, cache_dir=cache, sources=sources)

    assert again.reused and again.venv == src_env.venv and again.duration_s < 0.5
    assert log.stat().st_mtime_ns == before


def test_constraints_pin_what_is_asked_for_and_install_nothing_else(tmp_path, cache, sources):
    # pip's constraints: a root constraints.txt and a `-c` include pin versions; installed as requirements, their lines
    # brought in `unasked`, which nothing asks for
    root = _repo(tmp_path, {"requirements.txt": "tinydep\n-c pins/tiny.txt\n", "pins/tiny.txt": "tinydep==1.0\n",
                            "constraints.txt": "unasked==1.0\n", "test_it.py": "def test_it():\n    pass\n"})

    environment = prepare_environment(root, cache_dir=cache, sources=sources)

    assert environment.requirements == ("tinydep",)
    assert environment.constraints == ("unasked==1.0", "tinydep==1.0")
    assert (environment.venv.parent / "constraints.txt").read_text() == "unasked==1.0\ntinydep==1.0\n"
    assert not installed(environment.venv, "unasked")
    site = next(environment.venv.glob("lib/python*/site-packages"))
    assert [info.name for info in site.glob("tinydep-*.dist-info")] == ["tinydep-1.0.dist-info"]  # 2.0 is there too


def test_a_crashed_build_is_not_reused(plain_env):
    environment, leftover = plain_env

    assert not environment.reused and not leftover.exists()
    assert (environment.venv.parent / READY).is_file()


def test_a_unittest_repository_reports_each_test_through_pytest(tmp_path, plain_env, cache, sources):
    root = _repo(tmp_path, {"calc.py": "def add(a, b):\n    return a + b\n", "tests/__init__.py": "",
                            "tests/tests_calc.py": """\
        import unittest

        from calc import add


        class AddTests(unittest.TestCase):
            def test_adds(self):
                self.assertEqual(add(1, 2), 3)

            def test_wrong(self):
                self.assertEqual(add(1, 1), 3)
        """})
    command = detect_test_command(root)

    run = run_repository(root, command, prepare_environment(root, cache_dir=cache, sources=sources), limits=LIMITS)

    assert command.runner == "unittest"
    assert run.outcomes == {"tests/tests_calc.py::AddTests::test_adds": "passed",
                            "tests/tests_calc.py::AddTests::test_wrong": "failed"}


PASSES_EVERYTHING = """\
    import pytest


    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        outcome.get_result().outcome = "passed"
    """  # a repository's conftest that forges every test's report


def test_a_repository_conftest_that_passes_everything_is_caught_by_the_canaries(tmp_path, plain_env, cache, sources):
    root = _repo(tmp_path, {"conftest.py": PASSES_EVERYTHING, "test_it.py": "def test_wrong():\n    assert 1 + 1 == 3\n"})

    run = run_repository(root, detect_test_command(root), prepare_environment(root, cache_dir=cache, sources=sources),
                         limits=LIMITS)

    assert run.report.tampered and not run.report.ok
    assert run.outcomes == {"test_it.py::test_wrong": "passed"}  # what the forged report says, judged above


def test_the_canaries_still_catch_a_forgery_when_a_module_cannot_be_imported(tmp_path, plain_env, cache, sources):
    # the run goes on past a collection error (--continue-on-collection-errors), so the canaries ran: a module that
    # does not import must not excuse them, as it did when pytest stopped there
    root = _repo(tmp_path, {"conftest.py": PASSES_EVERYTHING, "test_it.py": "def test_wrong():\n    assert 1 + 1 == 3\n",
                            "test_broken.py": "import not_here\n"})

    run = run_repository(root, detect_test_command(root), prepare_environment(root, cache_dir=cache, sources=sources),
                         limits=LIMITS)

    assert "the runner's canary test that must have failed is reported passed" in run.report.tampered
    assert run.outcomes == {"test_broken.py": "errors", "test_it.py::test_wrong": "passed"}


def test_an_internal_error_is_reported_as_one_not_as_a_forgery(tmp_path, plain_env, cache, sources):
    # more-itertools 11.2.1 under 1 GiB: a MemoryError while pytest reported a test ends its session there; the junit
    # file and the canaries are cut short, as in a run killed at a limit
    root = _repo(tmp_path, {"conftest.py": """\
        def pytest_runtest_logreport(report):
            if report.when == "call" and report.nodeid.endswith("test_b"):
                raise MemoryError
        """, "test_it.py": "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n\n\ndef test_c():\n    pass\n"})

    run = run_repository(root, detect_test_command(root), prepare_environment(root, cache_dir=cache, sources=sources),
                         limits=LIMITS)

    assert run.report.tampered == [] and run.report.exit_code == 3 and not run.report.ok
    assert "INTERNALERROR> MemoryError" in run.report.output_tail
    assert run.outcomes == {"test_it.py::test_a": "passed", "test_it.py::test_b": "passed"}


def test_a_reproduction_test_missing_from_the_report_is_tampering(tmp_path, plain_env, cache, sources):
    root = _repo(tmp_path, {"test_it.py": "def test_there():\n    pass\n"})

    run = run_repository(root, detect_test_command(root), prepare_environment(root, cache_dir=cache, sources=sources),
                         limits=LIMITS, expected=["test_it.py::test_reproduces_the_bug"])

    assert run.report.tampered == ["1 test(s) the project's files define are missing from the report, first: "
                                   "test_it.py::test_reproduces_the_bug"]


def test_a_repository_whose_code_rewrites_the_junit_at_exit_is_tampered_with_its_true_outcomes(
        tmp_path, plain_env, cache, sources):
    # ADR 25's reviewer attack, in a repository run: the module the tests import drops every failure but the
    # canaries' from the junit file at interpreter exit, after pytest wrote it
    root = _repo(tmp_path, {"shelf.py": """\
        import os
        import re
        import weakref


        def half(x):
            return x // 3


        def _green():
            for name in os.listdir("."):
                if name.endswith(".xml"):
                    with open(name) as handle:
                        text = handle.read()
                    def keep(match):
                        return match.group(0) if 'classname="~' in match.group(0) else \\
                            re.sub(r"<failure.*?</failure>", "", match.group(0), flags=re.S)
                    with open(name, "w") as handle:
                        handle.write(re.sub(r"<testcase .*?(?:/>|</testcase>)", keep, text, flags=re.S))


        class _Anchor:
            pass


        _anchor = _Anchor()
        weakref.finalize(_anchor, _green)
        """, "test_shelf.py": "from shelf import half\n\n\ndef test_half():\n    assert half(4) == 2\n\n\n"
                              "def test_zero():\n    assert half(0) == 0\n"})

    run = run_repository(root, detect_test_command(root), prepare_environment(root, cache_dir=cache, sources=sources),
                         limits=LIMITS)

    assert [reason.split(":")[0] for reason in run.report.tampered] == [
        "the junit report disagrees with the streamed outcomes on 1 test(s)"]
    assert not run.report.ok and run.report.exit_code == 1 and run.report.failed == 1
    assert run.outcomes == {"test_shelf.py::test_half": "failed", "test_shelf.py::test_zero": "passed"}


def test_a_failed_install_gives_the_log_tail_without_secrets_and_is_not_marked_ready(tmp_path, cache, sources,
                                                                                     monkeypatch):
    monkeypatch.setenv("AITEAM_FAKE_API_TOKEN", SECRET)
    root = _repo(tmp_path, {"requirements.txt": f"{SECRET}==1.0\n", "app.py": ""})

    with pytest.raises(InstallFailed, match="installing the requirements failed") as failure:
        prepare_environment(root, cache_dir=cache, sources=sources)

    assert "No matching distribution found for ***==1.0" in failure.value.log_tail
    assert SECRET not in failure.value.log_tail and len(failure.value.log_tail) <= 4000
    key = environment_key(root, ["requirements.txt"], ("pytest",), requirements=(f"{SECRET}==1.0",))
    assert not list(cache.glob(f"env-{key[:24]}/{READY}"))


@pytest.mark.parametrize("files", [
    {"requirements.txt": "--extra-index-url https://example.invalid/simple\nrequests\n"},
    {"constraints.txt": "--index-url https://example.invalid/simple\n"},
    {"requirements.txt": "-c pins.txt\nrequests\n", "pins.txt": "--find-links /srv/wheels\nrequests==2.0\n"},
])
def test_a_requirements_or_constraints_file_naming_its_own_index_is_refused(files, tmp_path, cache, sources):
    root = _repo(tmp_path, files)

    with pytest.raises(BadDependencies, match="names its own package source"):
        prepare_environment(root, cache_dir=cache, sources=sources)


@pytest.mark.parametrize("files", [
    {"requirements.txt": "evil @ https://example.invalid/evil-1.0.tar.gz\n"},
    {"requirements.txt": "git+https://example.invalid/evil.git#egg=evil\n"},
    {"pyproject.toml": '[project]\ndependencies = ["evil@ file:///srv/evil.tar.gz"]\n'},
    {"pyproject.toml": '[project]\ndependencies = ["/srv/evil-source-tree"]\n'},
    {"requirements.txt": "--no-binary :all:\nevil-sdist\n"},
    {"requirements.txt": "--find /srv/wheels\nevil\n"},
    {"setup.cfg": "[options]\ninstall_requires =\n    ok\n    --index-url=https://example.invalid\n"},
    {"constraints.txt": "evil @ https://example.invalid/evil-1.0.tar.gz\n"},
    {"requirements.txt": "-c pins.txt\n", "pins.txt": "--no-binary :all:\nevil\n"},
    {"requirements.txt": "-c pins.txt\n", "pins.txt": "-r more.txt\n", "more.txt": "git+https://example.invalid/e.git\n"},
])
def test_only_names_versions_and_markers_are_installed(files, tmp_path, cache, sources):
    root = _repo(tmp_path, files)

    with pytest.raises(BadDependencies, match="direct URL or VCS source|pip option|not a requirement"):
        prepare_environment(root, cache_dir=cache, sources=sources)


def test_source_distributions_are_never_built(tmp_path):
    """Building an sdist runs its setup script outside the sandbox: pip is told to take wheels only."""
    argv = _pip(tmp_path / "venv", PackageSources(index_url="https://pypi.org/simple"), ["-r", "requirements.txt"])
    assert argv[argv.index("--only-binary") + 1] == ":all:"


def test_requirements_are_read_from_every_dependency_file_without_running_any(tmp_path):
    root = _repo(tmp_path, {
        "requirements.txt": "-e .\n-r requirements/test.txt\nattrs>=23  # comment\n",
        "requirements/test.txt": "-r ../requirements.txt\nhypothesis\n",
        "pyproject.toml": '[project]\ndependencies = ["click"]\n[project.optional-dependencies]\n'
                          'test = ["pytest-mock"]\ndocs = ["sphinx"]\n',
        "setup.cfg": "[options]\ninstall_requires =\n    six; python_version < '3.12'\n",
        "poetry.lock": '[[package]]\nname = "idna"\nversion = "3.7"\n',
        "setup.py": "raise SystemExit('never run')\n"})
    files = dependency_files(root)

    requirements, constraints, notes = collect_requirements(root, files)

    assert files == ["poetry.lock", "pyproject.toml", "requirements.txt", "requirements/test.txt", "setup.cfg",
                     "setup.py"]
    assert requirements == ["hypothesis", "attrs>=23", "click", "pytest-mock", "six; python_version < '3.12'",
                            "idna==3.7"]
    assert constraints == [] and notes == []


def test_toxs_deps_and_extras_are_the_tests_dependencies_too(tmp_path):
    root = _repo(tmp_path, {
        "tox.ini": """\
            [base]
            deps = hypothesis
            [testenv]
            extras = testing
            deps =
                pytest-cov
                -r{toxinidir}/requirements/test.txt
                {[base]deps}
                .[speed]
                py38: old-backport
                -e git+https://example.invalid/x.git#egg=x
                {env:EXTRA_DEP}
            commands = pytest {posargs}
            """,
        "requirements/test.txt": "pytest-mock\n",
        "pyproject.toml": '[project]\nname = "calc"\ndependencies = ["click"]\n[project.optional-dependencies]\n'
                          'testing = ["freezegun"]\nspeed = ["ujson"]\ndocs = ["sphinx"]\n'})
    files = dependency_files(root)

    requirements, constraints, notes = collect_requirements(root, files)

    assert "tox.ini" in files and constraints == []  # its bytes key the venv
    assert requirements == ["click", "freezegun", "ujson", "pytest-cov", "pytest-mock", "hypothesis"]
    assert notes == ["tox.ini [testenv] deps not installed (another environment's, a tox substitution, or not a plain "
                     "requirement): py38: old-backport, -e git+https://example.invalid/x.git#egg=x, {env:EXTRA_DEP}"]


def test_toxs_factor_conditions_are_read_for_the_environment_with_no_factors(tmp_path):
    # django-filter 26.2: `!latest-!django61: djangorestframework` is for every environment but those two
    root = _repo(tmp_path, {"tox.ini": """\
        [testenv]
        deps =
            django52: Django>=5.2,<6.0
            !latest-!django61: djangorestframework
            !latest-django61: drf-main-only
            latest,!pypy: either-one
            !pypy: -r requirements/test.txt
            py38,pypy: old-backport
        """, "requirements/test.txt": "pytest-mock\n"})

    requirements, _, notes = collect_requirements(root, dependency_files(root))

    assert requirements == ["djangorestframework", "either-one", "pytest-mock"]
    assert notes == ["tox.ini [testenv] deps not installed (another environment's, a tox substitution, or not a plain "
                     "requirement): django52: Django>=5.2,<6.0, !latest-django61: drf-main-only, "
                     "py38,pypy: old-backport"]


def test_constraints_are_collected_apart_from_requirements_and_key_the_venv(tmp_path):
    root = _repo(tmp_path / "repo", {
        "requirements.txt": "attrs\n-c pins/base.txt\n",
        # all a constraints file includes pins; pip refuses extras on a constraint, the pin stays
        "pins/base.txt": "attrs==23.1 --hash=sha256:0123\n-r more.txt\n",
        "pins/more.txt": "idna[codec]==3.7\n",
        "requirements/constraints-dev.txt": "hypothesis==6.0\n",  # a constraints file by its name
        "tox.ini": "[testenv]\ndeps =\n    pytest-mock\n    -c{toxinidir}/pins/tox.txt\n",
        "pins/tox.txt": "pytest-mock==3.12\n"})
    files = dependency_files(root)

    requirements, constraints, notes = collect_requirements(root, files)

    assert files == ["requirements.txt", "requirements/constraints-dev.txt", "tox.ini"]
    assert requirements == ["attrs", "pytest-mock"] and notes == []
    assert constraints == ["hypothesis==6.0", "attrs==23.1", "idna==3.7", "pytest-mock==3.12"]
    key = environment_key(root, files, requirements=tuple(requirements), constraints=tuple(constraints))
    (root / "pins/more.txt").write_text("idna==3.8\n")  # no dependency file's bytes change
    again = collect_requirements(root, files)
    assert environment_key(root, files, requirements=tuple(again.requirements),
                           constraints=tuple(again.constraints)) != key
    assert environment_key(root, [], requirements=("a", "b")) != environment_key(root, [], requirements=("a",),
                                                                                 constraints=("b",))


def test_a_constraints_include_outside_the_repository_is_refused(tmp_path):
    (tmp_path / "outside.txt").write_text("evil==1.0\n")
    root = _repo(tmp_path / "repo", {"requirements.txt": "-c ../outside.txt\nattrs\n"})

    with pytest.raises(BadDependencies, match=r"^requirements.txt names .*/outside.txt, outside the repository"):
        collect_requirements(root, dependency_files(root))


@pytest.mark.parametrize(("files", "refused"), [
    ({"requirements.txt": "-r /etc/hostname\n"}, "requirements.txt names /etc/hostname, outside the repository"),
    ({"requirements.txt": "-r link.txt\n", "link.txt": "/etc/hostname"},
     "requirements.txt names link.txt, a link pointing outside the repository"),
])
def test_an_include_outside_the_tree_is_refused_naming_it(files, refused, tmp_path):
    root = _repo(tmp_path, {name: text for name, text in files.items() if name != "link.txt"})
    if "link.txt" in files:
        (root / "link.txt").symlink_to(files["link.txt"])

    with pytest.raises(BadDependencies) as error:
        collect_requirements(root, dependency_files(root))

    assert str(error.value) == refused


def test_toxs_include_outside_the_tree_is_left_out_with_a_note(tmp_path):
    root = _repo(tmp_path, {"tox.ini": "[testenv]\ndeps =\n    -r/etc/hostname\n    attrs\n",
                            "requirements.txt": "idna\n"})

    requirements, _, notes = collect_requirements(root, dependency_files(root))

    assert requirements == ["idna", "attrs"]  # tox named no file of the repository: requirements.txt still counts
    assert notes == ["tox.ini [testenv] deps not installed (another environment's, a tox substitution, or not a plain "
                     "requirement): -r/etc/hostname (tox.ini [testenv] deps names /etc/hostname, outside the "
                     "repository)"]


@pytest.mark.parametrize("separator", ["\f", "\v", "\x1c", "\x85", "\u2028", "\u2029"])
def test_a_requirement_holding_any_line_break_is_refused(separator, tmp_path):
    escaped = f"\\u{ord(separator):04x}"  # TOML refuses some of them written as they are
    root = _repo(tmp_path, {"pyproject.toml": f'[project]\ndependencies = ["attrs{escaped}evil"]\n'})

    with pytest.raises(BadDependencies, match="holds a line break"):
        collect_requirements(root, dependency_files(root))


PIP_COMPILE = {name: f"{name.split('.')[0].split('/')[1]}-pin\n" for name in (
    "requirements/build.in", "requirements/build.txt", "requirements/dev.in", "requirements/dev.txt",
    "requirements/docs.in", "requirements/docs.txt", "requirements/tests.in", "requirements/tests.txt",
    "requirements/tests37.txt", "requirements/typing.in", "requirements/typing.txt")}


def test_a_pip_compile_folder_installs_the_tests_files_only(tmp_path):
    # jinja2 3.1.6's shape: tests.txt pins attrs 24.3.0, tests37.txt 24.2.0; all together could not install
    root = _repo(tmp_path, PIP_COMPILE)

    requirements, _, notes = collect_requirements(root, dependency_files(root))

    assert requirements == ["tests-pin"]
    assert notes == ["requirements files not installed (not the tests' (docs, typing, lint, another Python "
                     "version)): requirements/build.txt, requirements/dev.txt, requirements/docs.txt, "
                     "requirements/tests37.txt, requirements/typing.txt"]


def test_the_files_toxs_deps_name_are_the_requirements_files_installed(tmp_path):
    root = _repo(tmp_path, {**PIP_COMPILE, "requirements.txt": "root-pin\n",
                            "requirements/tests.txt": "-r ../requirements.txt\ntests-pin\n",
                            "tox.ini": "[testenv]\ndeps = -r requirements/tests.txt\n"})
    files = dependency_files(root)

    requirements, _, notes = collect_requirements(root, files)

    assert requirements == ["root-pin", "tests-pin"]
    assert notes[0].startswith("requirements files not installed (tox's [testenv] deps name the files its tests "
                               "use): requirements.txt, requirements/build.txt, requirements/dev.txt, "
                               "requirements/docs.txt, requirements/tests37.txt, requirements/typing.txt")
    key = environment_key(root, files, requirements=tuple(requirements))
    (root / "requirements/tests37.txt").write_text("other-pin\n")  # not installed, its bytes still key the venv
    assert environment_key(root, files, requirements=tuple(requirements)) != key


@pytest.mark.parametrize(("names", "installed"), [
    # arrow 1.4.0
    (["requirements/requirements.txt", "requirements/requirements-tests.txt", "requirements/requirements-docs.txt"],
     ["requirements/requirements.txt", "requirements/requirements-tests.txt"]),
    # python-dateutil 4.0.0: no test-like file, the dev one is the tests'
    (["requirements-dev.txt"], ["requirements-dev.txt"]),
    # pyproject-hooks 1.3.3: its noxfile installs -r dev-requirements.txt
    (["dev-requirements.txt", "docs_requirements.txt"], ["dev-requirements.txt"]),
    (["test-requirements.txt", "dev_requirements.txt", "requirements.txt"],
     ["test-requirements.txt", "requirements.txt"]),
    # humanize 4.17.0: a mypy lock only
    (["requirements-mypy.txt", "requirements.txt"], ["requirements.txt"]),
    (["requirements/base.txt", "requirements/prod.txt", "requirements/testing.txt", "requirements/dev.txt",
      "requirements/lint.txt", "requirements/test-py2.7.txt", f"requirements/tests{sys.version_info[0]}"
      f"{sys.version_info[1]}.txt"],
     ["requirements/base.txt", "requirements/prod.txt", "requirements/testing.txt",
      f"requirements/tests{sys.version_info[0]}{sys.version_info[1]}.txt"]),
])
def test_only_the_plain_and_test_like_requirements_files_are_installed(names, installed, tmp_path):
    root = _repo(tmp_path, {name: f"{Path(name).stem.replace('.', '-')}-pin\n" for name in names})

    requirements, _, _ = collect_requirements(root, dependency_files(root))

    assert sorted(requirements) == sorted(f"{Path(name).stem.replace('.', '-')}-pin" for name in installed)


PROJECT = """\
    [project]
    name = "calc"
    dependencies = ["click"]
    [project.optional-dependencies]
    testing = ["freezegun"]
    speed = ["ujson"]
    docs = ["sphinx"]
    """
RUN_BASE = """\
    [env_run_base]
    extras = ["testing"]
    deps = ["pytest-cov", "-r {tox_root}/requirements/test.txt", "-c constraints/tox.txt", ".[speed]",
            "{env:EXTRA_DEP}", { replace = "ref", of = ["env", "lint", "deps"], extend = true }]
    """
LEGACY = '''\
    [tool.tox]
    legacy_tox_ini = """
    [testenv]
    extras = testing
    deps =
        pytest-cov
        -r{toxinidir}/requirements/test.txt
        -c constraints/tox.txt
        .[speed]
        {env:EXTRA_DEP}
    """
    '''


@pytest.mark.parametrize(("files", "where"), [
    ({"pyproject.toml": PROJECT, "tox.toml": RUN_BASE}, "tox.toml [env_run_base]"),
    ({"pyproject.toml": PROJECT + RUN_BASE.replace("[env_run_base]", "[tool.tox.env_run_base]")},
     "pyproject.toml [tool.tox.env_run_base]"),
    ({"pyproject.toml": PROJECT + LEGACY}, "pyproject.toml [tool.tox] legacy_tox_ini [testenv]"),
])
def test_toxs_toml_configuration_is_read_as_tox_ini_is(files, where, tmp_path):
    root = _repo(tmp_path, {**files, "requirements/test.txt": "pytest-mock\n", "constraints/tox.txt": "pytest-cov==5.0\n"})
    names = dependency_files(root)

    requirements, constraints, notes = collect_requirements(root, names)

    assert ("tox.toml" in names) == ("tox.toml" in files)  # its bytes key the venv
    assert requirements == ["click", "freezegun", "ujson", "pytest-cov", "pytest-mock"]
    assert constraints == ["pytest-cov==5.0"]
    assert len(notes) == 1 and notes[0].startswith(f"{where} deps not installed") and "{env:EXTRA_DEP}" in notes[0]


def test_tox_ini_is_read_before_tox_toml_as_tox_reads_it(tmp_path):
    root = _repo(tmp_path, {"tox.ini": "[testenv]\ndeps = hypothesis\n", "tox.toml": RUN_BASE})

    assert collect_requirements(root, dependency_files(root)).requirements == ["hypothesis"]


def test_an_all_extra_is_read_only_when_no_test_extra_says_what_the_tests_need(tmp_path):
    # idna 3.21: hypothesis is in its `all` extra only; `all = ["idna[x]"]` would install the published idna
    only_all = _repo(tmp_path / "idna", {"pyproject.toml": """\
        [project]
        name = "idna"
        [project.optional-dependencies]
        all = ["ruff", "hypothesis >= 6", "idna[codec]"]
        codec = ["chardet"]
        """})
    with_tests = _repo(tmp_path / "other", {"pyproject.toml": """\
        [project]
        name = "other"
        [project.optional-dependencies]
        all = ["pandas"]
        [dependency-groups]
        lint = ["ruff"]
        test = ["pytest", {include-group = "lint"}]
        """})

    assert collect_requirements(only_all, ["pyproject.toml"])[0] == ["hypothesis >= 6", "chardet"]
    assert collect_requirements(with_tests, ["pyproject.toml"])[0] == ["pytest", "ruff"]


def test_a_dev_group_is_read_only_without_a_test_like_one_and_without_lint_or_docs_tools(tmp_path):
    # attrs 26.1.0: dev = tests + ruff; tomlkit 0.15.3: a dev group only, with pre-commit, mypy, Sphinx<5 and furo
    with_tests = _repo(tmp_path / "attrs", {"pyproject.toml": """\
        [dependency-groups]
        tests = ["hypothesis", "build"]
        dev = [{include-group = "tests"}, "ruff"]
        """})
    dev_only = _repo(tmp_path / "tomlkit", {"pyproject.toml": """\
        [dependency-groups]
        dev = ["pytest~=7.2", "pytest-cov~=4.0", "PyYAML~=6.0", "pre-commit~=2.20", "mypy==1.19.1",
               "Sphinx>=4.3.2,<5.0.0", "furo>=2022.9.29,<2023.0.0", "types-PyYAML", "flake8_bugbear"]
        """})
    setup_cfg = _repo(tmp_path / "cfg", {"setup.cfg": "[options.extras_require]\ndev =\n    mock\n    black\n"
                                                       "docs =\n    sphinx\n"})

    assert collect_requirements(with_tests, ["pyproject.toml"]) == (["hypothesis", "build"], [], [])
    requirements, _, notes = collect_requirements(dev_only, ["pyproject.toml"])
    assert requirements == ["pytest~=7.2", "pytest-cov~=4.0", "PyYAML~=6.0"]
    assert notes == ["left out of the dev group (lint, typing, docs and release tools, not the tests'): "
                     "pre-commit~=2.20, mypy==1.19.1, Sphinx>=4.3.2,<5.0.0, furo>=2022.9.29,<2023.0.0, types-PyYAML, "
                     "flake8_bugbear"]
    assert collect_requirements(setup_cfg, ["setup.cfg"]).requirements == ["mock"]


@pytest.mark.parametrize(("poetry", "pep440"), [
    ("^1.2.3", ">=1.2.3,<2.0.0"), ("^1.2", ">=1.2,<2.0"), ("^0.2.3", ">=0.2.3,<0.3.0"), ("^0.0.3", ">=0.0.3,<0.0.4"),
    ("^0", ">=0,<1"), ("~1.2.3", ">=1.2.3,<1.3.0"), ("~1.2", ">=1.2,<1.3"), ("~1", ">=1,<2"), ("*", ""),
    ("1.2.3", "==1.2.3"), ("1.2.*", "==1.2.*"), (">= 1.2, < 1.5", ">=1.2,<1.5"), ("~=1.4", "~=1.4"),
    (">=2.0 !=2.1", ">=2.0,!=2.1"), ("^1 || ^2", None), ("latest", None), ("1.0 |", None),
])
def test_poetrys_version_constraints_become_pep_440_specifiers(poetry, pep440):
    assert specifier(poetry) == pep440


def test_poetry_and_pdm_groups_are_read_as_dependency_groups(tmp_path):
    # poetry-core 2.5.0 and unearth 0.19.0: their tests' dependencies (virtualenv, flask) are in these groups only
    poetry = _repo(tmp_path / "poetry", {"pyproject.toml": """\
        [tool.poetry.dependencies]
        python = "^3.9"
        attrs = "^23.1"
        sqlalchemy = {version = "~2.0", extras = ["asyncio"], optional = true}
        uvloop = {version = "*", markers = "sys_platform != 'win32'", python = ">=3.10"}
        sibling = {path = "../sibling", develop = true}
        [tool.poetry.group.test.dependencies]
        virtualenv = ">=20.21"
        tomli-w = "^1.0.0"
        private-helper = {version = "1.0", source = "internal"}
        [tool.poetry.group.dev.dependencies]
        pre-commit = ">=2.15.0"
        [tool.poetry.dev-dependencies]
        black = "*"
        """})
    pdm = _repo(tmp_path / "pdm", {"pyproject.toml": """\
        [project]
        dependencies = ["packaging>=20"]
        [tool.pdm.dev-dependencies]
        test = ["flask>=2.1.2", "-e file:///${PROJECT_ROOT}/plugins/x#egg=x"]
        doc = ["furo"]
        [tool.poetry.dependencies]
        ignored = "*"
        """})

    requirements, _, notes = collect_requirements(poetry, ["pyproject.toml"])

    assert requirements == ["attrs>=23.1,<24.0", 'uvloop; (sys_platform != \'win32\') and (python_version >= "3.10")',
                            "virtualenv>=20.21", "tomli-w>=1.0.0,<2.0.0"]
    assert notes == ["[tool.poetry.dependencies] not installed: sibling (a path dependency: packages come only from "
                     "the operator's sources)",
                     "[tool.poetry.group.test.dependencies] not installed: private-helper (from its own package "
                     "source 'internal': packages come only from the operator's sources)"]
    assert collect_requirements(pdm, ["pyproject.toml"]) == (
        ["packaging>=20", "flask>=2.1.2"], [],
        ["[tool.pdm.dev-dependencies] test not installed (a local path): -e file:///${PROJECT_ROOT}/plugins/x#egg=x"])


def test_a_poetry_dev_group_is_read_without_its_tools_when_no_group_is_test_like(tmp_path):
    root = _repo(tmp_path, {"pyproject.toml": """\
        [tool.poetry.group.dev.dependencies]
        pytest = "^8.0"
        mypy = "^1.0"
        [tool.poetry.dev-dependencies]
        pytest-mock = {version = "^3.0", python = "^3.8 || ~2.7"}
        """})

    requirements, _, notes = collect_requirements(root, ["pyproject.toml"])

    assert requirements == ["pytest>=8.0,<9.0", 'pytest-mock>=3.0,<4.0; ((python_version >= "3.8" and python_version '
                                                '< "4.0") or (python_version >= "2.7" and python_version < "2.8"))']
    assert notes == ["left out of the dev group (lint, typing, docs and release tools, not the tests'): "
                     "mypy>=1.0,<2.0"]


def test_the_key_follows_the_dependency_files_bytes(tmp_path):
    root = _repo(tmp_path, {"requirements.txt": "attrs\n"})
    first = environment_key(root, ["requirements.txt"])
    (root / "requirements.txt").write_text("attrs==23.1\n")

    assert environment_key(root, ["requirements.txt"]) != first
    shutil.copy(root / "requirements.txt", root / "copy.txt")
    assert environment_key(root, ["requirements.txt"]) == environment_key(root, ["requirements.txt"])
