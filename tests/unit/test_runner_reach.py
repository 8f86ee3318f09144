"""The static check at review: code that reaches into the test runner is refused; ordinary code and tests are not.

Each attack below forges a pass from inside the pytest process (tests/unit/test_sandbox_tamper.py runs several
for real); the check reads it without running it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from agents.lint import runner_reach_findings
from agents.runner_reach import reach_findings
from tests.unit.test_sandbox_tamper import REVIEWERS_FINALIZE  # the attack's source, run for real there

PRODUCT = "readinglist/__init__.py"
ATTACKS = {
    "no-op runtest": ("import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n",
                      "imports _pytest.python"),
    "plugin from the heap": ("import gc\nfrom _pytest.config import Config\n"
                             "cfg = next(o for o in gc.get_objects() if isinstance(o, Config))\n",
                             "imports from _pytest.config"),
    "exit hook": ("import atexit\nimport os\natexit.register(lambda: os._exit(0))\n", "imports atexit"),
    "module table": ("import sys\nrunner = sys.modules['_py' + 'test.python']\n", "uses sys.modules"),
    "import from a string": ("mod = __import__('o' + 's')\n", "uses __import__"),
    "importlib": ("import importlib\nname = 'x'\nmod = importlib.import_module(name)\n", "uses importlib.import_module"),
    "frames": ("import sys\ncaller = sys._getframe(1).f_globals\n", "uses sys._getframe"),
    "the report file": ("def save():\n    open('.report.xml', 'w').write('<testsuites/>')\n", "('report.xml')"),
    "a hook": ("def pytest_runtest_makereport(item, call):\n    pass\n", "defines the pytest hook"),
    "product imports pytest": ("import pytest\n", "imports pytest"),
    "builtins patched": ("import builtins\nbuiltins.print = lambda *a: None\n", "imports builtins"),
    "finalizer at exit": ("import weakref\nweakref.finalize(object, print)\n", "uses weakref.finalize"),
    "finalizer imported": ("from weakref import finalize\n", "imports from weakref what reaches"),
    "threading's exit hook": ("import threading\nthreading._register_atexit(print)\n",
                              "uses threading._register_atexit"),
    "gc callback": ("import gc\ngc.callbacks.append(lambda phase, info: None)\n", "uses gc.callbacks"),
    "signal handler": ("import signal\nsignal.signal(signal.SIGTERM, print)\n", "uses signal.signal"),
    "descriptor redirected": ("import os\nos.dup2(os.open('/dev/null', os.O_WRONLY), 1)\n", "uses os.dup2"),
    "descriptor copied": ("import os\nsaved = os.dup(3)\n", "uses os.dup"),
    "descriptors closed": ("import os\nos.closerange(3, 1024)\n", "uses os.closerange"),
    "stdout replaced": ("import io\nimport sys\nsys.stdout = io.StringIO()\n", "replaces sys.stdout"),
    "stderr replaced in a tuple": ("import sys\nsys.stderr, x = None, 1\n", "replaces sys.stderr"),
    "the outcome pipe found": ("import os\nfds = os.listdir('/proc/self/fd')\n", "('/proc/self/fd')"),
    "the canaries named": ("def spared(name):\n    return name.startswith('~aiteam-')\n", "('~aiteam')"),
}


@pytest.mark.parametrize("code, said", ATTACKS.values(), ids=ATTACKS.keys())
def test_product_code_that_reaches_into_the_runner_is_refused(code, said):
    findings = reach_findings([(PRODUCT, code)])
    assert findings and all(f.startswith(f"{PRODUCT}:") for f in findings) and any(said in f for f in findings), findings


def test_the_reviewers_exit_time_rewrite_of_the_report_is_now_refused():
    """It passed this check before: plain literals only, nothing of pytest named (the stream catches it anyway)."""
    assert reach_findings([("shelf/books.py", REVIEWERS_FINALIZE)]) == ["shelf/books.py:28: uses weakref.finalize"]


def test_a_test_may_handle_signals_and_capture_streams_but_not_redirect_descriptors():
    fine = ("import signal\nimport sys\n\n\ndef test_handler():\n    signal.signal(signal.SIGUSR1, print)\n"
            "    sys.stdout = sys.__stdout__\n")
    assert reach_findings([("tests/test_a.py", fine)]) == []
    assert reach_findings([("tests/test_a.py", "import os\n\n\ndef test_x():\n    os.dup2(1, 2)\n")]) == [
        "tests/test_a.py:5: uses os.dup2"]
    assert reach_findings([(PRODUCT, "import sys\n\nprint('x', file=sys.stderr)\nout = sys.stdout\n")]) == []


def test_a_test_file_may_use_pytests_api_but_not_its_internals():
    fine = ("import builtins\n\nimport pytest\nfrom pytest import approx, raises\n\n\n"
            "@pytest.mark.parametrize('n', [1])\ndef test_a(n, monkeypatch):\n"
            "    monkeypatch.setattr(builtins, 'input', lambda _: 'y')\n    with raises(ValueError):\n"
            "        int('x')\n    assert n == approx(1.0)\n")
    assert reach_findings([("tests/test_a.py", fine)]) == []
    forged = "import pytest\n\npytest.Function.runtest = lambda self: None\n"
    assert reach_findings([("tests/test_a.py", forged)]) == [
        "tests/test_a.py:3: reaches for .runtest",
        "tests/test_a.py:3: uses pytest.Function, which is the runner's, not its API for tests"]
    assert reach_findings([("tests/test_a.py", "import pytest as p\n")])  # an alias would hide p.Function


def test_ordinary_code_and_the_sample_project_pass():
    docstring = '"""Run the tests with pytest."""\nimport re\n\nWORD = re.compile(r"\\w+")\n'
    assert reach_findings([(PRODUCT, docstring)]) == []
    sample = Path(__file__).resolve().parents[2] / "agents/cassettes/sample_project"
    assert reach_findings([(p.relative_to(sample).as_posix(), p.read_text()) for p in sample.rglob("*.py")]) == []


def test_the_qc_lint_reads_the_engineers_files_and_leaves_qcs_alone(tmp_path):
    (tmp_path / "readinglist").mkdir()
    (tmp_path / "tests/acceptance").mkdir(parents=True)
    (tmp_path / PRODUCT).write_text(ATTACKS["no-op runtest"][0])
    (tmp_path / "tests/acceptance/test_a.py").write_text("import _pytest\n")  # QC's: not the engineer's to fix
    assert runner_reach_findings(tmp_path) == [
        "readinglist/__init__.py:1: imports _pytest.python, part of the test runner or the interpreter's machinery",
        "readinglist/__init__.py:2: reaches for .runtest"]


def test_a_file_nested_too_deep_for_the_check_to_read_is_a_finding_not_a_crash():
    generated = "TABLE = " + " + ".join(['"a"'] * 3000) + "\n"  # RecursionError while its tree is built

    findings = reach_findings([(PRODUCT, generated), ("tests/test_a.py", "def test_x(:\n")])

    assert findings == [f"{PRODUCT}:1: nests deeper than this check can read (RecursionError): split the expression, "
                        "or generate the data as a file the code reads"]
