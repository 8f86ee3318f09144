"""Canary tests the runner adds to every default run, and the check that the report tells the truth about them.

The code under test runs in the process that runs pytest and writes the junit report, so it can turn every test
into a pass (a no-op ``Function.runtest``, a hook that rewrites reports, a rewritten junit file, a fake one and
``os._exit(0)``). Such tampering also touches what the runner added: one canary must pass, the other must fail
with a nonce drawn for this run. A report in which the failing canary passed, either canary is missing, or the
failure does not carry the nonce was not written by honest tests, whatever else it says. Nor may a test the
project's files define (``expected.py``) be missing from it.

The canaries live in a root-owned directory of the scratch copy, named to sort last (pytest runs files before
directories, and names in order): a patch the code installs only while its tests run is in place when they run.
This catches tampering that does not single the canaries out. Code written to spare them (it can read this
file like any other) is the static check's to refuse (``agents/runner_reach.py``); ADR 0025 says what each
layer catches.
"""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from agents.sandbox.report import Case, JunitOutcome, junit_test_id, outcome_of

CANARY_DIR_PREFIX = "~aiteam-"  # "~" sorts after letters and digits; a generated path cannot hold one
_SOURCE = '''"""Added by aiteam's test runner to check the report: not part of the project."""


def {must_pass}():
    assert sum(range(4)) == 6


def {must_fail}():
    raise AssertionError("{nonce}")
'''


_SUMMARY = re.compile(r"^(=* ?)((?:\d+ \w+(?:, )?)+) in (\d.*)$")  # "== 1 failed, 2 passed in 0.1s =="


@dataclass(frozen=True)
class Canary:
    directory: str  # relative to the scratch dir
    module: str
    must_pass: str
    must_fail: str
    nonce: str

    @property
    def classname(self) -> str:
        """The junit classname of both canaries (pytest's "dir.module")."""
        return f"{self.directory}.{self.module}"


def plant(scratch: Path) -> Canary:
    """Write this run's canaries into the populated scratch dir, owned by the worker: the run's uid can read them,
    not change them."""
    names = [f"test_{secrets.token_hex(6)}" for _ in range(3)]
    canary = Canary(f"{CANARY_DIR_PREFIX}{secrets.token_hex(6)}", names[0], names[1], names[2], secrets.token_hex(16))
    folder = scratch / canary.directory
    folder.mkdir(mode=0o755)
    path = folder / f"{canary.module}.py"
    path.write_text(_SOURCE.format(must_pass=canary.must_pass, must_fail=canary.must_fail, nonce=canary.nonce))
    path.chmod(0o444)
    return canary


def judged(cases: list[Case] | None, canary: Canary | None, expected: list[str],
           project: Path) -> tuple[JunitOutcome | None, list[str]]:
    """The project's outcome (canaries left out of its figures) and why the report cannot be believed (none:
    []). Not judged: no report (the run died, and the missing report fails it anyway), or no canaries planted (a
    custom command, which need not collect them)."""
    if cases is None or canary is None:
        return (None if cases is None else outcome_of(cases, project)), []
    own = [case for case in cases if case.classname != canary.classname]
    ours = [case for case in cases if case.classname == canary.classname]
    if _interrupted(own):  # pytest stops at a collection error before running anything: nothing to compare
        return outcome_of(own, project), []
    return outcome_of(own, project), _canary_reasons(canary, ours) + _missing(expected, own, project)


def _interrupted(cases: list[Case]) -> bool:
    return any(not case.classname and case.kind in ("failed", "errors") for case in cases)


def _canary_reasons(canary: Canary, cases: list[Case]) -> list[str]:
    reasons = []
    for name, outcome in ((canary.must_pass, "passed"), (canary.must_fail, "failed")):
        found = [case for case in cases if case.name == name]
        if len(found) != 1:
            reasons.append(f"the runner's canary test that must have {outcome} is reported {len(found)} times")
        elif found[0].kind != outcome:
            reasons.append(f"the runner's canary test that must have {outcome} is reported {found[0].kind}")
        elif outcome == "failed" and canary.nonce not in found[0].message:
            reasons.append("the runner's failing canary is reported without this run's nonce")
    if len(cases) > 2:
        reasons.append(f"the report holds {len(cases) - 2} canary test(s) the runner did not add")
    return reasons


def _missing(expected: list[str], cases: list[Case], project: Path) -> list[str]:
    """The expected tests the report does not mention. A module-level entry (its import failed, or it skipped
    itself) stands for all of that module's tests."""
    reported = {junit_test_id(case.classname, case.name, project).split("[", 1)[0] for case in cases}
    missing = [test for test in expected if test not in reported and test.split("::", 1)[0] not in reported]
    if not missing:
        return []
    return [f"{len(missing)} test(s) the project's files define are missing from the report, first: "
            f"{', '.join(missing[:5])}"]


def scrubbed(tail: str, canary: Canary) -> str:
    """pytest's output without the canaries: the engineer and the reviewer read it, and a failure that is not
    theirs, or counts one off, would mislead them. Lines naming a canary go; the summary counts them out."""
    markers = (canary.directory, canary.must_pass, canary.must_fail, canary.nonce)
    lines = [line for line in tail.splitlines() if not any(marker in line for marker in markers)]
    for index in range(len(lines) - 1, -1, -1):
        if (match := _SUMMARY.match(lines[index])) and "failed" in match.group(2):
            lines[index] = f"{match.group(1)}{_counted_out(match.group(2))} in {match.group(3)}"
            break
    return "\n".join(lines) + "\n"


def _counted_out(counts: str) -> str:
    """"2 failed, 3 passed" → "1 failed, 2 passed": one canary passed, one failed."""
    kept = []
    for part in counts.split(", "):
        number, word = part.split(" ", 1)
        left = int(number) - (word in ("failed", "passed"))
        if left:
            kept.append(f"{left} {word}")
    return ", ".join(kept) or "no tests ran"
