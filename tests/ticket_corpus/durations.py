"""A bug in a single-module repository configured by pytest.ini: "1h30m" parses as one hour."""
from tests.ticket_corpus.base import Entry

PYTEST_INI = "[pytest]\ntestpaths = tests\naddopts = -q\n"
DURATIONS_V1 = '''\
"""Durations written as people write them: "45s"."""
import re

_SECONDS = re.compile(r"(\\d+)s")


def parse_duration(text: str) -> int:
    """Seconds in a duration such as '45s'."""
    match = _SECONDS.fullmatch(text.strip())
    if not match:
        raise ValueError(f"not a duration: {text!r}")
    return int(match[1])
'''
DURATIONS_V2 = '''\
"""Durations written as people write them: "1h30m", "45s"."""
import re

_PART = re.compile(r"(\\d+)([hms])")
_UNIT = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> int:
    """Seconds in a duration such as '1h30m' or '45s'."""
    match = _PART.match(text.strip())
    if not match:
        raise ValueError(f"not a duration: {text!r}")
    return int(match[1]) * _UNIT[match[2]]
'''
FORMAT = '''

def format_duration(seconds: int) -> str:
    """The shortest form parse_duration reads back: 5400 -> '1h30m', 0 -> '0s'."""
    if seconds < 0:
        raise ValueError(f"a duration is not negative: {seconds}")
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n]
    return "".join(parts) or "0s"
'''
TESTS_V1 = '''\
import pytest

from durations import parse_duration


def test_seconds():
    assert parse_duration("45s") == 45


def test_garbage_is_refused():
    with pytest.raises(ValueError):
        parse_duration("soon")
'''
TESTS_V2 = TESTS_V1 + '''

def test_hours():
    assert parse_duration("2h") == 7200
'''
FORMAT_TESTS = '''\
from durations import format_duration


def test_format_uses_the_largest_units():
    assert format_duration(5400) == "1h30m"


def test_zero_is_zero_seconds():
    assert format_duration(0) == "0s"
'''

FIX = {
    "reasoning": "parse_duration matched the first part only, so '1h30m' was one hour and '1h30x' was accepted. It "
                 "now requires the whole text to be parts and adds them all up.",
    "edits": [
        {"path": "durations.py",
         "search": '_PART = re.compile(r"(\\d+)([hms])")\n',
         "replace": '_PART = re.compile(r"(\\d+)([hms])")\n_WHOLE = re.compile(r"(?:\\d+[hms])+")\n'},
        {"path": "durations.py",
         "search": '    match = _PART.match(text.strip())\n    if not match:\n'
                   '        raise ValueError(f"not a duration: {text!r}")\n'
                   '    return int(match[1]) * _UNIT[match[2]]\n',
         "replace": '    text = text.strip()\n    if not _WHOLE.fullmatch(text):\n'
                    '        raise ValueError(f"not a duration: {text!r}")\n'
                    '    return sum(int(number) * _UNIT[unit] for number, unit in _PART.findall(text))\n'},
        {"path": "tests/test_durations.py",
         "search": 'def test_hours():\n    assert parse_duration("2h") == 7200\n',
         "replace": 'def test_hours():\n    assert parse_duration("2h") == 7200\n\n\n'
                    'def test_every_part_counts():\n    assert parse_duration("1h30m") == 5400\n'},
    ],
}
QC = {
    "reasoning": "The reported value, a three-part duration, and text left over after the parts.",
    "files": [{"path": "tests/acceptance/test_duration_parts.py", "content": '''\
import pytest

from durations import parse_duration


def test_hours_and_minutes_add_up():
    assert parse_duration("1h30m") == 5400


def test_all_three_units_add_up():
    assert parse_duration("1h1m1s") == 3661


def test_trailing_garbage_is_refused():
    with pytest.raises(ValueError):
        parse_duration("1h30x")
'''}],
    "coverage": {"AC-1": ["test_hours_and_minutes_add_up"], "AC-2": ["test_all_three_units_add_up"],
                 "AC-3": ["test_trailing_garbage_is_refused"]},
}
HIDDEN = {"tests/test_hidden_duration_parts.py": '''\
import pytest

from durations import format_duration, parse_duration


def test_minutes_and_seconds():
    assert parse_duration("2m5s") == 125


def test_it_reads_back_what_format_writes():
    assert parse_duration(format_duration(3725)) == 3725


def test_a_unit_without_a_number_is_refused():
    with pytest.raises(ValueError):
        parse_duration("1hm")
'''}

ENTRY = Entry(
    key="durations-every-part",
    kind="bug",
    title="parse_duration ignores everything after the first unit",
    body="Timeouts in our config are written like \"1h30m\", and parse_duration(\"1h30m\") returns 3600, so jobs "
         "are killed after an hour. It should be 5400: every part counts (\"1h1m1s\" is 3661). Text that is not "
         "made of parts, like \"1h30x\", should raise ValueError instead of being read as one hour.",
    commits=(
        ("Parse durations in seconds", {"pytest.ini": PYTEST_INI, "durations.py": DURATIONS_V1,
                                        "tests/test_durations.py": TESTS_V1}),
        ("Accept hours and minutes", {"durations.py": DURATIONS_V2, "tests/test_durations.py": TESTS_V2}),
        ("Add format_duration", {"durations.py": DURATIONS_V2 + FORMAT, "tests/test_format.py": FORMAT_TESTS}),
    ),
    summary="parse_duration reads only the first part of a duration; every part must count, and text that is not "
            "made of parts must be refused.",
    criteria=('parse_duration("1h30m") returns 5400', 'parse_duration("1h1m1s") returns 3661',
              'parse_duration("1h30x") raises ValueError'),
    interface={"name": "parse_duration", "signature": "durations.parse_duration(text: str) -> int",
               "description": "seconds; ValueError for text that is not a duration"},
    fix=FIX,
    qc=QC,
    hidden=HIDDEN,
)
