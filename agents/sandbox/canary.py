"""Canary tests the runner adds to every default run, and the check that the run tells the truth about them.

The code under test runs in the process that runs pytest, so it can turn every test into a pass before its outcome
is reported (a no-op ``Function.runtest``, a hook that rewrites reports). Outcomes are taken from the stream the
runner's plugin writes as each test ends (``stream.py``), which later code cannot take back; the junit file must
agree with it. Tampering before the report also touches what the runner added: one canary must pass, the other
must fail with a nonce drawn for this run. A run in which the failing canary passed, either canary is missing,
or the failure does not carry the nonce was not reported by honest tests, whatever else it says. Nor may a test
the project's files define (``expected.py``) be missing from it.

The canaries live in a root-owned directory of the scratch copy, named to sort last (pytest collects names in
order, and before pytest 8 files before directories), and the outcome plugin moves them after every other test once
the installed plugins reordered them (best effort: a conftest's hook can wrap it): a patch the code installs only
while its tests run is in place when they run. This catches tampering that does not single the canaries out. Code
written to spare them (it can read this file like any other) is the static check's to refuse
(``agents/runner_reach.py``); ADR 0025 says what each layer catches. Running last, they are also the last in
pytest's progress, where ``scrubbed`` takes them out.
"""
from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
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
SESSION_TEARDOWN = "(session teardown)"  # the project's error reported on the last test's teardown, a canary's
# pytest's output, as the scrubber reads it
_COUNTS = re.compile(r"^((?:\d+ \w+, )*\d+ \w+) in (\d.*)$")  # the last line's title: "1 failed, 2 passed in 0.1s"
_SECTION = re.compile(r"^=+ .+ =+$")  # "=== FAILURES ===", "=== short test summary info ===", the summary unless -q
_ENTRY = re.compile(r"^_+ (.*[^_ ].*) _+$")  # "____ test_x ____" heads a test's entry ("_ _ _" parts a traceback)
_CLOSING = re.compile(r"^-+ (?!Captured ).+ -+$")  # "--- generated xml file: … ---", not "--- Captured stdout call ---"
_COLLECTED = re.compile(r"^((?:collecting \.\.\. )?collected )(\d+) items?((?: / .+)?)$")  # "collecting ... ": -v
_COMPLETE = " [100%]"
_PERCENT = re.compile(r" \[[ \d]{2}\d%\]$")  # the progress at the end of a line (console_output_style "progress")
_ROW = re.compile(r"^(\S+) \[[ \d]{2}\d%\]$")  # -q: a line of letters, wrapped at the terminal's width
_FINAL_ROW = re.compile(r"^(\S*) * \[100%\]$")


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
    session is judged only on what the stream shows; pytest stops at a collection error before running anything
    (unless told to continue), so then there are no canaries to compare."""
    project = project_outcomes(canary, streamed)
    own = list(project)
    reasons = list(streamed.forged)
    if not streamed.finished:
        if streamed.started and ended_by_itself and not streamed.overflowed:  # a stream cut by its bound: too large
            reasons.append("the run exited by itself in the middle of pytest's session: the outcome stream was cut "
                           f"after {len(streamed.outcomes)} test(s) and never reached the end of the session")
        return outcome_of(replace(streamed, outcomes=project), own), reasons
    if cases is None:
        reasons.append("the junit report is missing or unreadable though pytest ended its session")
    else:
        reasons += disagreements(streamed, cases)
    if not _interrupted(streamed, own):
        reasons += _canary_reasons(canary, streamed) + _missing(expected, own)
    return outcome_of(replace(streamed, outcomes=project), own), reasons


def project_outcomes(canary: Canary, streamed: Streamed) -> dict[str, str]:
    """Each of the project's tests' outcome (pytest's node id → kind), the canaries left out; and, when the last
    test's teardown failed on a canary, that error as the project's own, SESSION_TEARDOWN: a session-scoped fixture
    of the project ends there, whichever test ran last."""
    project = {test: kind for test, kind in streamed.outcomes.items() if not canary.owns(test)}
    return {**project, SESSION_TEARDOWN: "errors"} if _teardown_blamed(canary, streamed) else project


def _canary_outcome(canary: Canary, streamed: Streamed, test: str) -> str | None:
    """A canary's outcome as streamed; its call's when the error on it is the teardown of a session fixture of the
    project (project_outcomes counts that error as the project's)."""
    return streamed.phases[(test, "call")] if test == _teardown_blamed(canary, streamed) else streamed.outcomes.get(test)


def _teardown_blamed(canary: Canary, streamed: Streamed) -> str:
    """The canary whose teardown failed as the stream's last report, its setup and call as planted; "" if none."""
    test, when = streamed.reports[-1] if streamed.reports else ("", "")
    planted = {canary.node_id(canary.must_pass): "passed", canary.node_id(canary.must_fail): "failed"}.get(test)
    phases = streamed.phases
    if when != "teardown" or planted is None or phases.get((test, "teardown")) != "failed" \
            or phases.get((test, "setup")) != "passed" or phases.get((test, "call")) != planted:
        return ""
    return test


def _interrupted(streamed: Streamed, own: list[str]) -> bool:
    """pytest stopped at a collection error before running any test (exit 2): no canary ran. A run told to go on
    past collection errors (a repository's, --continue-on-collection-errors) ran them, and they must show."""
    return streamed.exitstatus == 2 and any("::" not in test and streamed.outcomes[test] == "errors" for test in own)


def _canary_reasons(canary: Canary, streamed: Streamed) -> list[str]:
    reasons = []
    for name, outcome in ((canary.must_pass, "passed"), (canary.must_fail, "failed")):
        found = _canary_outcome(canary, streamed, canary.node_id(name))
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


def scrubbed(tail: str, canary: Canary, streamed: Streamed) -> str:
    """pytest's output without the canaries: the engineer and the reviewer read it, and a failure that is not
    theirs, or counts one off, would mislead them. Their entries (a failure's traceback, under its "___ name ___"
    head) and the lines that name them go, and so does a section header left with nothing under it; the
    summary and the "collected" count leave them out; so does the progress (their letters in -q's dots, the
    100% moved to the project's last test), but only where the stream shows they ran after every other test,
    so that what is taken off the end of the progress is theirs. Where the output is not in a shape read here
    (xdist, a count or classic progress style, colours), what cannot be placed surely is left as it was."""
    lines = tail.splitlines()
    named = _namer(canary)
    if blamed := _teardown_blamed(canary, streamed):  # the project's session fixture failed there: keep its error
        lines = [_as_session_teardown(line, blamed) for line in lines]
    planted = all(_canary_outcome(canary, streamed, canary.node_id(name)) == outcome
                  for name, outcome in ((canary.must_pass, "passed"), (canary.must_fail, "failed")))
    if planted and (letters := _ran_last(canary, streamed)):
        lines = _progress_without(lines, letters, named)
    lines = _without_entries(lines, named, (canary.must_pass, canary.must_fail))
    if planted:
        collected = next(((index, found) for index, line in enumerate(lines) if (found := _COLLECTED.match(line))), None)
        if collected is not None:
            lines[collected[0]] = _collected_out(collected[1])
        for index in range(len(lines) - 1, -1, -1):
            if (counted := _summary_out(lines[index])) is not None:
                lines[index] = counted
                break
    return "\n".join(lines) + "\n"


def _as_session_teardown(line: str, blamed: str) -> str:
    """The head of the error entry (and its summary line) of a teardown that failed on the canary that ran last,
    renamed for what it is: the project's session-scoped fixture, so that its traceback stays for the reader."""
    name = blamed.rsplit("::", 1)[-1]
    if (head := _ENTRY.match(line)) and head.group(1) == f"ERROR at teardown of {name}":
        return line.replace(head.group(1), "ERROR at teardown of the last test: a session-scoped fixture's")
    if line.startswith(f"ERROR {blamed} - "):
        return f"ERROR {SESSION_TEARDOWN} - {line[len(f'ERROR {blamed} - '):]}"
    return line


def _namer(canary: Canary) -> Callable[[str], bool]:
    markers = (canary.directory, canary.must_pass, canary.must_fail, canary.nonce)
    return lambda line: any(marker in line for marker in markers)


def _ran_last(canary: Canary, streamed: Streamed) -> str:
    """The canaries' progress letters ("." passed, "F" failed) in the order they ran, when all their reports came
    after every other test's: then, pytest writing one letter per report as it comes, theirs are the last. ""
    otherwise (a plugin that shuffles, xdist)."""
    letter = {canary.node_id(canary.must_pass): ".", canary.node_id(canary.must_fail): "F"}
    theirs = [index for index, (test, _) in enumerate(streamed.reports) if test in letter]
    if not theirs or theirs[0] != len(streamed.reports) - len(theirs):
        return ""
    calls = [letter[test] for test, when in streamed.reports[theirs[0]:] if when == "call"]
    return "".join(calls) if sorted(calls) == [".", "F"] else ""


def _progress_without(lines: list[str], letters: str, named: Callable[[str], bool]) -> list[str]:
    """The progress as pytest would have shown it without the canaries, which ran last (their letters are the
    last written): the line that reaches 100% is theirs. Other lines' percentages, counted with them, stay."""
    ends = [index for index, line in enumerate(lines) if line.endswith(_COMPLETE)]
    if len(ends) != 1:
        return lines
    end = ends[0]
    if not named(lines[end]):  # -q: letters only, wrapped at the terminal's width
        return _letters_without(lines, end, letters) or lines
    # a line per file (the canaries' file is the last) or per test (-v: theirs are the last two): those lines go
    # with every line naming a canary, and the line before them is the project's last
    above = end
    while above > 0 and named(lines[above - 1]):
        above -= 1
    if above > 0 and _PERCENT.search(lines[above - 1]):
        lines = [*lines[:above - 1], lines[above - 1][:-len(_COMPLETE)] + _COMPLETE, *lines[above:]]
    return lines


def _letters_without(lines: list[str], end: int, letters: str) -> list[str] | None:
    """-q's progress without `letters` at its end: "....F.F    [100%]" → ".....      [100%]" (the final line keeps its
    width). They may have wrapped to the final line, or the project's last letter may have ended a line of its
    own ("...  [ 96%]" then ".F  [100%]"): the project's last line then ends at 100%. None if the letters are not
    there (output printed between them, another style)."""
    final = _FINAL_ROW.match(lines[end])
    if final is None:
        return None
    rows = {end: final.group(1)}
    row, left = end, letters
    while True:
        cut = min(len(rows[row]), len(left))
        if not rows[row].endswith(left[len(left) - cut:]):
            return None
        rows[row], left = rows[row][:len(rows[row]) - cut], left[:len(left) - cut]
        if not left:
            break
        row -= 1
        if row < 0 or (wrapped := _ROW.match(lines[row])) is None:
            return None
        rows[row] = wrapped.group(1)
    width = len(lines[end])
    kept = lines[:row]
    if rows[row]:
        kept.append(rows[row] + _COMPLETE.rjust(width - len(rows[row])))
    elif kept and (wrapped := _ROW.match(kept[-1])):
        kept[-1] = wrapped.group(1) + _COMPLETE.rjust(width - len(wrapped.group(1)))
    return kept + lines[end + 1:]


def _without_entries(lines: list[str], named: Callable[[str], bool], names: tuple[str, str]) -> list[str]:
    """Without the canaries' entries (from a "___ test_x ___" head to the next head, section, summary or a
    plugin's "--- … ---" line; left to the line filter if none follows), the lines naming them, and the sections
    this leaves with nothing under them ("=== FAILURES ===" over the canary's failure alone)."""
    keep = [not named(line) for line in lines]
    index = 0
    while index < len(lines):
        head = _ENTRY.match(lines[index])
        if head and any(name in head.group(1) for name in names):
            after = next((later for later in range(index + 1, len(lines)) if _ends_entry(lines[later])), None)
            if after is not None:
                keep[index:after] = [False] * (after - index)
                index = after
                continue
        index += 1
    bounds = [index for index, line in enumerate(lines) if _SECTION.match(line) or _CLOSING.match(line)
              or _is_summary(line)]
    for number, head in enumerate(bounds):
        body = range(head + 1, bounds[number + 1] if number + 1 < len(bounds) else len(lines))
        if _SECTION.match(lines[head]) and not _is_summary(lines[head]) and any(lines[i].strip() for i in body) \
                and not any(keep[i] and lines[i].strip() for i in body):
            for i in (head, *body):
                keep[i] = False
    return [line for line, kept in zip(lines, keep, strict=True) if kept]


def _ends_entry(line: str) -> bool:
    return bool(_ENTRY.match(line) or _SECTION.match(line) or _CLOSING.match(line) or _is_summary(line)
                or line.startswith("!!!"))


def _is_summary(line: str) -> bool:
    return _COUNTS.match(line.strip("=").strip()) is not None or line.strip("=").strip().startswith("no tests ran")


def _summary_out(line: str) -> str | None:
    """pytest's last line with the canaries counted out ("1 failed, 3 passed in 0.1s", framed in "=" unless -q);
    None if the line is not one."""
    framed = line.startswith("=") and line.endswith("=")
    title = line.strip("=").strip() if framed else line
    counts = _COUNTS.match(title)
    if counts is None or "failed" not in counts.group(1) or "passed" not in counts.group(1):
        return None
    title = f"{_counted_out(counts.group(1))} in {counts.group(2)}"
    return _framed(title, len(line)) if framed else title


def _framed(title: str, width: int) -> str:
    """As pytest's terminal writer centres a title in "=" (``sep``)."""
    fill = "=" * max((width - len(title) - 2) // 2, 1)
    line = f"{fill} {title} {fill}"
    return line + "=" if len(line) < width else line


def _collected_out(found: re.Match[str]) -> str:
    """ "collected 5 items / 3 selected" (not -q) → "collected 3 items / 1 selected": both canaries were collected."""
    number = int(found.group(2)) - 2
    rest = re.sub(r"/ (\d+) selected", lambda selected: f"/ {int(selected.group(1)) - 2} selected", found.group(3))
    return f"{found.group(1)}{number} item{'' if number == 1 else 's'}{rest}"


def _counted_out(counts: str) -> str:
    """"2 failed, 3 passed" → "1 failed, 2 passed": one canary passed, one failed."""
    kept = []
    for part in counts.split(", "):
        number, word = part.split(" ", 1)
        left = int(number) - (word in ("failed", "passed"))
        if left:
            kept.append(f"{left} {word}")
    return ", ".join(kept) or "no tests ran"
