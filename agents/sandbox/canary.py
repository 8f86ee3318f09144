"""Canary tests the runner adds to every default run, and the check that the run tells the truth about them.

The code under test runs in the process that runs pytest, so it can turn every test into a pass before its outcome
is reported (a no-op ``Function.runtest``, a hook that rewrites reports). Outcomes are taken from the stream the
runner's plugin writes as each test ends (``stream.py``), which later code cannot take back; the junit file must
agree with it. Tampering before the report also touches what the runner added: one canary must pass, the other
must fail with a nonce drawn for this run. A run in which the failing canary passed, either canary is missing,
or the failure does not carry the nonce was not reported by honest tests, whatever else it says. Nor may a test
the project's files define (``expected.py``) be missing from it.

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

from agents.sandbox.report import Case, JunitOutcome
from agents.sandbox.stream import Streamed, disagreements, outcome_of

CANARY_DIR_PREFIX = "~aiteam-"  # "~" sorts after letters and digits; a generated path cannot hold one
_SOURCE = '''"""Added by aiteam's test runner to check the report: not part of the project."""


def {must_pass}():
    assert sum(range(4)) == 6


def {must_fail}():
    raise AssertionError("{nonce}")
'''


_PLUGIN = Path(__file__).with_name("outcome_plugin.py")
_SUMMARY = re.compile(r"^(=* ?)((?:\d+ \w+(?:, )?)+) in (\d.*)$")  # "== 1 failed, 2 passed in 0.1s =="


@dataclass(frozen=True)
class Canary:
    directory: str  # relative to the scratch dir
    module: str
    must_pass: str
    must_fail: str
    nonce: str
    plugin: str  # the module name of outcome_plugin.py's copy, in the same directory

    def node_id(self, name: str) -> str:
        return f"{self.directory}/{self.module}.py::{name}"

    def owns(self, node_id: str) -> bool:
        return node_id.startswith(f"{self.directory}/")


def plant(scratch: Path) -> Canary:
    """Write this run's canaries into the populated scratch dir, owned by the worker: the run's uid can read them,
    not change them."""
    names = [f"test_{secrets.token_hex(6)}" for _ in range(3)]
    canary = Canary(f"{CANARY_DIR_PREFIX}{secrets.token_hex(6)}", names[0], names[1], names[2], secrets.token_hex(16),
                    f"aiteam_outcomes_{secrets.token_hex(6)}")
    folder = scratch / canary.directory
    folder.mkdir(mode=0o755)
    source = _SOURCE.format(must_pass=canary.must_pass, must_fail=canary.must_fail, nonce=canary.nonce)
    for name, text in ((canary.module, source), (canary.plugin, _PLUGIN.read_text())):
        path = folder / f"{name}.py"
        path.write_text(text)
        path.chmod(0o444)
    return canary


def judged(streamed: Streamed, cases: list[Case] | None, canary: Canary, expected: list[str], *,
           ended_by_itself: bool) -> tuple[JunitOutcome, list[str]]:
    """The project's outcome as streamed (canaries left out of its figures) and why the run cannot be believed
    (none: []). ended_by_itself: neither timed out nor killed by a signal. A run that did not get through its
    session is judged only on what the stream shows; pytest stops at a collection error before running anything,
    so then there are no canaries to compare."""
    own = [test for test in streamed.outcomes if not canary.owns(test)]
    reasons = list(streamed.forged)
    if not streamed.finished:
        if streamed.started and ended_by_itself:
            reasons.append("the run exited by itself in the middle of pytest's session: the outcome stream was cut "
                           f"after {len(streamed.outcomes)} test(s) and never reached the end of the session")
        return outcome_of(streamed, own), reasons
    if cases is None:
        reasons.append("the junit report is missing or unreadable though pytest ended its session")
    else:
        reasons += disagreements(streamed, cases)
    if not _interrupted(streamed, own):
        reasons += _canary_reasons(canary, streamed) + _missing(expected, own)
    return outcome_of(streamed, own), reasons


def _interrupted(streamed: Streamed, own: list[str]) -> bool:
    return any("::" not in test and streamed.outcomes[test] == "errors" for test in own)


def _canary_reasons(canary: Canary, streamed: Streamed) -> list[str]:
    reasons = []
    for name, outcome in ((canary.must_pass, "passed"), (canary.must_fail, "failed")):
        found = streamed.outcomes.get(canary.node_id(name))
        if found is None:
            reasons.append(f"the runner's canary test that must have {outcome} is not reported")
        elif found != outcome:
            reasons.append(f"the runner's canary test that must have {outcome} is reported {found}")
        elif outcome == "failed" and canary.nonce not in streamed.messages.get(canary.node_id(name), ""):
            reasons.append("the runner's failing canary is reported without this run's nonce")
    extra = [test for test in streamed.outcomes if canary.owns(test)
             and test not in (canary.node_id(canary.must_pass), canary.node_id(canary.must_fail))]
    if extra:
        reasons.append(f"the run reports {len(extra)} canary test(s) the runner did not add")
    return reasons


def _missing(expected: list[str], own: list[str]) -> list[str]:
    """The expected tests the stream does not mention. A module-level entry (its import failed, or it skipped
    itself) stands for all of that module's tests."""
    reported = {test.split("[", 1)[0] for test in own}
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
