"""The static check at review: code that reaches into the test runner is refused; ordinary code and tests are not.

Each attack below forges a pass from inside the pytest process (tests/unit/test_sandbox_tamper.py runs several
for real); the check reads it without running it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from agents.lint import runner_reach_findings
from agents.runner_reach import reach_findings

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
}


@pytest.mark.parametrize("code, said", ATTACKS.values(), ids=ATTACKS.keys())
def test_product_code_that_reaches_into_the_runner_is_refused(code, said):
    findings = reach_findings([(PRODUCT, code)])
    assert findings and all(f.startswith(f"{PRODUCT}:") for f in findings) and any(said in f for f in findings), findings


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
