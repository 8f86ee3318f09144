import pytest

from invoice.money import format_amount


def test_a_credit_keeps_its_sign_after_the_currency():
    assert format_amount(-5, currency="USD") == "USD -0.05"


def test_lower_case_codes_are_refused():
    with pytest.raises(ValueError):
        format_amount(100, currency="eur")


def test_the_currency_is_a_keyword_argument():
    assert format_amount(100000, currency="GBP") == "GBP 1,000.00"
