"""A change of behaviour in a repository whose tests tox runs: retry delays are capped."""
from tests.ticket_corpus.base import Entry

TOX_INI = "[tox]\nenvlist = py311\n\n[testenv]\ndeps = pytest\ncommands = pytest tests {posargs}\n"
SETUP_PY = "from setuptools import setup\n\nsetup(name=\"retry\", version=\"0.9.0\", packages=[\"retry\"])\n"
BACKOFF_V1 = '''\
"""How long to wait between attempts."""


def delay(attempt: int, base: float = 0.5) -> float:
    """Seconds to wait before retry number `attempt` (from 1): doubling each time."""
    if attempt < 1:
        raise ValueError(f"attempts count from 1, not {attempt}")
    return base * 2 ** (attempt - 1)
'''
RUN = '''\
"""Calling a function until it succeeds."""
import time
from collections.abc import Callable
from typing import TypeVar

from retry.backoff import delay

T = TypeVar("T")


def call(fn: Callable[[], T], *, attempts: int = 5, retry_on: tuple[type[Exception], ...] = (OSError,),
         sleep: Callable[[float], None] = time.sleep) -> T:
    """fn's result, trying again after delay(n) on retry_on errors, at most `attempts` times in all."""
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except retry_on:
            if attempt == attempts:
                raise
            sleep(delay(attempt))
    raise AssertionError("unreachable")
'''
BACKOFF_TESTS = '''\
import pytest

from retry.backoff import delay


def test_the_delay_doubles():
    assert [delay(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]


def test_attempts_count_from_one():
    with pytest.raises(ValueError):
        delay(0)
'''
RUN_TESTS = '''\
import pytest

from retry.run import call


def test_it_retries_until_success():
    outcomes = iter([OSError("down"), OSError("down"), "ok"])
    waits = []

    def flaky():
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert call(flaky, sleep=waits.append) == "ok"
    assert waits == [0.5, 1.0]


def test_it_gives_up_after_the_last_attempt():
    def down():
        raise OSError("down")

    with pytest.raises(OSError):
        call(down, attempts=3, sleep=lambda s: None)
'''

FIX = {
    "reasoning": "delay grows without bound; a `cap` argument (30 seconds by default) bounds it. call() uses the "
                 "default, so long retry loops now wait at most 30 seconds between attempts.",
    "edits": [
        {"path": "retry/backoff.py",
         "search": 'def delay(attempt: int, base: float = 0.5) -> float:\n'
                   '    """Seconds to wait before retry number `attempt` (from 1): doubling each time."""\n',
         "replace": 'DEFAULT_CAP = 30.0\n\n\n'
                    'def delay(attempt: int, base: float = 0.5, cap: float = DEFAULT_CAP) -> float:\n'
                    '    """Seconds to wait before retry number `attempt` (from 1): doubling each time, at most `cap`."""\n'},
        {"path": "retry/backoff.py",
         "search": "    return base * 2 ** (attempt - 1)\n",
         "replace": "    return min(base * 2 ** (attempt - 1), cap)\n"},
        {"path": "tests/test_backoff.py",
         "search": "def test_attempts_count_from_one():\n",
         "replace": "def test_the_delay_stops_growing_at_the_cap():\n"
                    "    assert delay(20) == 30.0 and delay(4, cap=3) == 3\n\n\n"
                    "def test_attempts_count_from_one():\n"},
    ],
}
QC = {
    "reasoning": "The default cap, a cap given by the caller, and the early delays unchanged.",
    "files": [{"path": "tests/acceptance/test_capped_delay.py", "content": '''\
from retry.backoff import delay


def test_the_default_cap_is_30_seconds():
    assert delay(12) == 30.0


def test_a_caller_sets_the_cap():
    assert delay(12, cap=60) == 60.0


def test_early_delays_are_unchanged():
    assert [delay(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
'''}],
    "coverage": {"AC-1": ["test_the_default_cap_is_30_seconds"], "AC-2": ["test_a_caller_sets_the_cap"],
                 "AC-3": ["test_early_delays_are_unchanged"]},
}
HIDDEN = {"tests/test_hidden_capped_delay.py": '''\
from retry.backoff import delay
from retry.run import call


def test_a_long_run_never_waits_over_30_seconds():
    assert max(delay(n) for n in range(1, 40)) == 30.0


def test_a_small_cap_applies_from_the_first_attempt():
    assert delay(1, base=5, cap=2) == 2


def test_call_waits_at_most_the_cap():
    waits = []

    def down():
        raise OSError("down")

    try:
        call(down, attempts=12, sleep=waits.append)
    except OSError:
        pass
    assert max(waits) == 30.0
'''}

ENTRY = Entry(
    key="retry-capped-delay",
    kind="change",
    title="Cap the retry delay at 30 seconds",
    body="When the payment API is down for a while, our workers end up sleeping for hours between attempts "
         "(delay doubles forever: attempt 20 waits 262144 s). Please cap it: delay(attempt) never more than 30 "
         "seconds by default, with a `cap` argument for callers that want another limit. The first delays (0.5, 1, "
         "2, 4 s) stay as they are.",
    commits=(
        ("Exponential backoff", {"setup.py": SETUP_PY, "tox.ini": TOX_INI, "retry/__init__.py": "",
                                 "retry/backoff.py": BACKOFF_V1, "tests/test_backoff.py": BACKOFF_TESTS}),
        ("Retry a call with backoff", {"retry/run.py": RUN}),
        ("Test retrying calls", {"tests/test_run.py": RUN_TESTS}),
    ),
    summary="delay() doubles without bound; it must stop at a cap, 30 seconds unless the caller gives another.",
    criteria=("delay(12) returns 30.0", "delay(12, cap=60) returns 60.0", "delay(1..4) still returns 0.5, 1, 2, 4"),
    interface={"name": "delay", "signature": "retry.backoff.delay(attempt: int, base: float = 0.5, cap: float = 30.0) "
               "-> float", "description": "never more than cap"},
    fix=FIX,
    qc=QC,
    hidden=HIDDEN,
)
