import pytest

from durations import format_duration, parse_duration


def test_minutes_and_seconds():
    assert parse_duration("2m5s") == 125


def test_it_reads_back_what_format_writes():
    assert parse_duration(format_duration(3725)) == 3725


def test_a_unit_without_a_number_is_refused():
    with pytest.raises(ValueError):
        parse_duration("1hm")
