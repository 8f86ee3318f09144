"""Tests before and after a change, compared per test. Pure functions over outcomes (test id → "passed",
"failed", "errors" or "skipped"), as ``agents.sandbox.runner.RepoRun.outcomes`` gives them.

- **Baseline**: the repository's tests run twice at the base commit; a test whose outcome differs between the two
  runs is flaky and judges nothing.
- **Pass-to-pass**: every test that passed in both base runs must pass after the change. One that fails, errors,
  is skipped now or is no longer reported is listed (a test the change deleted is listed too: deleting a passing
  test is for a human to accept, not for the gate to assume).
- **Fail-to-pass**: each reproduction test (QC's, for a bug) must fail at the base commit (fail or error, its own
  entry or its module's collection error, since it may import what does not exist yet) and pass after.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

FAILED = ("failed", "errors")
LISTED = 20  # ids named per finding in a reason


@dataclass(frozen=True)
class Baseline:
    outcomes: dict[str, str]  # the first run's
    flaky: tuple[str, ...]  # outcome differs between the two runs (or reported in one only)
    passing: tuple[str, ...]  # passed in both: what pass-to-pass protects

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Reproduction:
    test: str
    at_base: str  # "failed", "errors", "passed", "skipped" or "missing"
    after: str
    ok: bool  # failed at base, passed after


@dataclass(frozen=True)
class Comparison:
    broken: tuple[str, ...]  # passed at base, now failed, errored or skipped
    disappeared: tuple[str, ...]  # passed at base, no longer reported
    fixed: tuple[str, ...]  # failed in both base runs, pass now
    added: tuple[str, ...]  # not at base, reported now
    reproductions: tuple[Reproduction, ...]
    before: dict[str, int]  # counts per outcome, base (first run)
    after: dict[str, int]

    @property
    def ok(self) -> bool:
        return not (self.broken or self.disappeared) and all(r.ok for r in self.reproductions)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def baseline_from(first: Mapping[str, str], second: Mapping[str, str]) -> Baseline:
    flaky = sorted(test for test in first.keys() | second.keys() if first.get(test) != second.get(test))
    passing = sorted(test for test, kind in first.items() if kind == "passed" and second.get(test) == "passed")
    return Baseline(dict(first), tuple(flaky), tuple(passing))


def compare(baseline: Baseline, after: Mapping[str, str], *, reproductions: Iterable[str] = (),
            reproductions_at_base: Mapping[str, str] | None = None) -> Comparison:
    """after: the outcomes after the change. reproductions_at_base: the outcomes of a run of the base commit with
    the reproduction tests added (they do not exist in the baseline itself)."""
    base = baseline.outcomes
    now = {test: _outcome(test, after) for test in baseline.passing}  # a module that no longer imports: broken
    broken = [test for test, kind in now.items() if kind not in ("passed", "missing")]
    disappeared = [test for test, kind in now.items() if kind == "missing"]
    steady_failures = {test for test, kind in base.items() if kind in FAILED and test not in baseline.flaky}
    fixed = sorted(test for test in steady_failures if after.get(test) == "passed")
    added = sorted(test for test in after if test not in base)
    checks = tuple(_reproduction(test, reproductions_at_base or {}, after) for test in reproductions)
    return Comparison(tuple(broken), tuple(disappeared), tuple(fixed), tuple(added), checks, counts(base),
                      counts(after))


def counts(outcomes: Mapping[str, str]) -> dict[str, int]:
    tally = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    for kind in outcomes.values():
        tally[kind] = tally.get(kind, 0) + 1
    return tally


def _reproduction(test: str, at_base: Mapping[str, str], after: Mapping[str, str]) -> Reproduction:
    before = _outcome(test, at_base)
    now = _outcome(test, after)
    return Reproduction(test, before, now, before in FAILED and now == "passed")


def _outcome(test: str, outcomes: Mapping[str, str]) -> str:
    """The test's own entry, else its module's (a collection error is reported once, for the file)."""
    if test in outcomes:
        return outcomes[test]
    module = test.split("::", 1)[0]
    return outcomes.get(module, "missing") if module != test else "missing"


def comparison_reasons(comparison: Mapping[str, Any]) -> list[str]:
    """Why a judged run fails, in words for the gate's reasons and the engineer's context."""
    reasons = [comparison["not_run"]] if comparison.get("not_run") else []
    if comparison["broken"]:
        reasons.append(f"pass-to-pass: {len(comparison['broken'])} test(s) that passed in both base runs fail now: "
                       f"{_listed(comparison['broken'])}")
    if comparison["disappeared"]:
        reasons.append(f"pass-to-pass: {len(comparison['disappeared'])} test(s) that passed in both base runs no "
                       f"longer run: {_listed(comparison['disappeared'])}")
    reproductions = {check["test"] for check in comparison["reproductions"]}
    added = [test for test in comparison["added_failing"] if test not in reproductions]  # said below, in their words
    if added:
        reasons.append(f"{len(added)} new test(s) fail: {_listed(added)}")
    if comparison["reproduction_missing"]:
        reasons.append("QC's reproduction tests did not run: none of its test files reported a test")
    for check in comparison["reproductions"]:
        if check["at_base"] == "passed":
            reasons.append(f"the reproduction test {check['test']} passes at the base commit: it does not reproduce "
                           "the bug")
        elif check["at_base"] not in FAILED:
            reasons.append(f"the reproduction test {check['test']} did not run at the base commit ({check['at_base']})")
        elif check["after"] != "passed":
            reasons.append(f"the reproduction test {check['test']} still fails after the change ({check['after']})")
    return reasons


def _listed(tests: list[str]) -> str:
    more = f" and {len(tests) - LISTED} more" if len(tests) > LISTED else ""
    return ", ".join(tests[:LISTED]) + more
