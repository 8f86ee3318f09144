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
