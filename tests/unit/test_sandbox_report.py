"""A test report keeps at most MAX_TEST_IDS ids per list, whatever the junit file holds, and records how many
there were. The ids the quality gate reads (acceptance tests that ran, modules that failed to import) survive
the cut, so capping never changes the gate's verdict."""
import json

from agents.quality import uncovered
from agents.sandbox.report import MAX_TEST_IDS, TestReport, parse_junit


def junit(tmp_path, cases: list[str]) -> TestReport:
    """The report the runner builds from a junit file of `cases` (testcase elements)."""
    path = tmp_path / "report.xml"
    path.write_text(f"<testsuites><testsuite>{''.join(cases)}</testsuite></testsuites>", encoding="utf-8")
    outcome = parse_junit(path, tmp_path)
    return TestReport(passed=outcome.passed, failed=outcome.failed, errors=outcome.errors, skipped=outcome.skipped,
                      failing_tests=outcome.failing_tests, tests_run=outcome.tests_run, exit_code=1)


def case(module: str, name: str, body: str = "") -> str:
    return f'<testcase classname="{module}" name="{name}">{body}</testcase>'


def many(n: int) -> list[str]:
    """n tests of tests/test_many.py, every other one failing."""
    return [case("tests.test_many", f"test_{i}", '<failure message="no"/>' * (i % 2)) for i in range(n)]


def test_five_thousand_tests_keep_a_bounded_list_and_their_full_count(tmp_path):
    report = junit(tmp_path, many(5000))
    data = report.to_dict()
    assert (report.passed, report.failed) == (2500, 2500)
    assert len(data["tests_run"]) == len(data["failing_tests"]) == MAX_TEST_IDS
    assert (data["tests_run_total"], data["failing_tests_total"]) == (5000, 2500)
    assert data["tests_run"][:2] == ["tests/test_many.py::test_0", "tests/test_many.py::test_1"]  # in run order
    assert len(json.dumps(data)) < 100_000
    assert TestReport.from_dict(json.loads(json.dumps(data))) == report


def test_acceptance_tests_run_after_the_cut_still_count_as_run(tmp_path):
    report = junit(tmp_path, many(5000) + [case("tests.acceptance.test_cli", "test_adds_a_book")])
    assert report.tests_run[-1] == "tests/acceptance/test_cli.py::test_adds_a_book"
    assert len(report.tests_run) == MAX_TEST_IDS and report.tests_run_total == 5001
    assert uncovered(["AC-1"], {"AC-1": ["test_adds_a_book"]}, report.to_dict()) == []


def test_a_module_that_failed_to_import_after_the_cut_is_still_named(tmp_path):
    report = junit(tmp_path, many(5000) + [case("", "tests.test_broken", '<error message="ImportError"/>')])
    assert "tests/test_broken.py" in report.failing_tests
    assert len(report.failing_tests) == MAX_TEST_IDS and report.failing_tests_total == 2501


def test_a_small_report_is_kept_whole(tmp_path):
    report = junit(tmp_path, many(4))
    assert report.tests_run == [f"tests/test_many.py::test_{i}" for i in range(4)] and report.tests_run_total == 4
    assert report.failing_tests == ["tests/test_many.py::test_1", "tests/test_many.py::test_3"]
    assert report.failing_tests_total == 2
