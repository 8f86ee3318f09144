"""A feature in a package with a dependency to install (numfmt, a wheel built here; local wheels only, no index):
amounts on invoices show their currency."""
from tests.ticket_corpus.base import Entry, Wheel

NUMFMT = Wheel("numfmt", "1.0", {"numfmt/__init__.py": '''\
"""Number formatting."""


def group(number: int, separator: str = ",") -> str:
    """The digits of a whole number grouped by thousands: 1234567 -> '1,234,567'."""
    return f"{number:,}".replace(",", separator)
'''})
REQUIREMENTS = "numfmt==1.0\n"
SETUP_CFG = """\
[metadata]
name = invoice
version = 2.0.1

[tool:pytest]
testpaths = tests
"""
MONEY_V1 = '''\
"""Amounts of money, kept in cents."""
from numfmt import group


def format_amount(cents: int) -> str:
    """An amount of cents as 1,234.56."""
    whole, part = divmod(cents, 100)
    return f"{group(whole)}.{part:02d}"
'''
MONEY_V2 = '''\
"""Amounts of money, kept in cents."""
from numfmt import group


def format_amount(cents: int) -> str:
    """An amount of cents as 1,234.56 (-1,234.56 for a credit)."""
    sign = "-" if cents < 0 else ""
    whole, part = divmod(abs(cents), 100)
    return f"{sign}{group(whole)}.{part:02d}"
'''
MONEY_TESTS = '''\
from invoice.money import format_amount


def test_thousands_are_grouped():
    assert format_amount(123456) == "1,234.56"


def test_small_amounts_keep_two_decimals():
    assert format_amount(5) == "0.05"


def test_a_credit_is_negative():
    assert format_amount(-123456) == "-1,234.56"
'''
LINES = '''\
"""Invoice lines and their total."""
from dataclasses import dataclass

from invoice.money import format_amount


@dataclass(frozen=True)
class Line:
    description: str
    cents: int
    quantity: int = 1


def total(lines: list[Line]) -> int:
    return sum(line.cents * line.quantity for line in lines)


def render(lines: list[Line]) -> str:
    rows = [f"{line.description:<30}{format_amount(line.cents * line.quantity):>12}" for line in lines]
    return "\\n".join([*rows, f"{'Total':<30}{format_amount(total(lines)):>12}"])
'''
LINES_TESTS = '''\
from invoice.lines import Line, render, total


def test_total_multiplies_by_quantity():
    assert total([Line("tea", 350, 2), Line("cake", 420)]) == 1120


def test_render_ends_with_the_total():
    assert render([Line("tea", 350, 2)]).splitlines()[-1].endswith("7.00")
'''

FIX = {
    "reasoning": "format_amount gains an optional currency code, checked to be three capital letters, written "
                 "before the amount; without one the output is unchanged, so invoices that pass none are as before.",
    "edits": [
        {"path": "invoice/money.py",
         "search": '''def format_amount(cents: int) -> str:
    """An amount of cents as 1,234.56 (-1,234.56 for a credit)."""
    sign = "-" if cents < 0 else ""
    whole, part = divmod(abs(cents), 100)
    return f"{sign}{group(whole)}.{part:02d}"
''',
         "replace": '''def format_amount(cents: int, currency: str | None = None) -> str:
    """An amount of cents as 1,234.56 (-1,234.56 for a credit), after its ISO 4217 currency code when given."""
    if currency is not None and not (len(currency) == 3 and currency.isascii() and currency.isupper()):
        raise ValueError(f"a currency is a three-letter code such as EUR, not {currency!r}")
    sign = "-" if cents < 0 else ""
    whole, part = divmod(abs(cents), 100)
    amount = f"{sign}{group(whole)}.{part:02d}"
    return f"{currency} {amount}" if currency else amount
'''},
        {"path": "tests/test_money.py",
         "search": 'def test_a_credit_is_negative():\n    assert format_amount(-123456) == "-1,234.56"\n',
         "replace": 'def test_a_credit_is_negative():\n    assert format_amount(-123456) == "-1,234.56"\n\n\n'
                    'def test_the_currency_comes_first():\n'
                    '    assert format_amount(123456, currency="EUR") == "EUR 1,234.56"\n'},
    ],
}
QC = {
    "reasoning": "Each criterion through format_amount as invoices call it.",
    "files": [{"path": "tests/acceptance/test_currency.py", "content": '''\
import pytest

from invoice.money import format_amount


def test_an_amount_shows_its_currency():
    assert format_amount(123456, currency="EUR") == "EUR 1,234.56"


def test_without_a_currency_nothing_changes():
    assert format_amount(123456) == "1,234.56"


def test_a_bad_currency_code_is_refused():
    with pytest.raises(ValueError):
        format_amount(100, currency="euro")
'''}],
    "coverage": {"AC-1": ["test_an_amount_shows_its_currency"], "AC-2": ["test_without_a_currency_nothing_changes"],
                 "AC-3": ["test_a_bad_currency_code_is_refused"]},
}
HIDDEN = {"tests/test_hidden_currency.py": '''\
import pytest

from invoice.money import format_amount


def test_a_credit_keeps_its_sign_after_the_currency():
    assert format_amount(-5, currency="USD") == "USD -0.05"


def test_lower_case_codes_are_refused():
    with pytest.raises(ValueError):
        format_amount(100, currency="eur")


def test_the_currency_is_a_keyword_argument():
    assert format_amount(100000, currency="GBP") == "GBP 1,000.00"
'''}

ENTRY = Entry(
    key="invoice-currency",
    kind="feature",
    title="Show the currency on invoice amounts",
    body="Our invoices go to customers in three currencies now and the amounts say only \"1,234.56\". Please let "
         "format_amount take the currency: format_amount(123456, currency=\"EUR\") should give \"EUR 1,234.56\". "
         "Calls without a currency must keep giving \"1,234.56\". A currency that is not a three-letter code in "
         "capitals (like \"euro\") should raise ValueError.",
    commits=(
        ("Format amounts with numfmt", {"requirements.txt": REQUIREMENTS, "setup.cfg": SETUP_CFG,
                                        "invoice/__init__.py": "", "invoice/money.py": MONEY_V1}),
        ("Show credits as negative amounts", {"invoice/money.py": MONEY_V2, "tests/test_money.py": MONEY_TESTS}),
        ("Render invoice lines and their total", {"invoice/lines.py": LINES, "tests/test_lines.py": LINES_TESTS}),
    ),
    summary="format_amount shows no currency; it must take an optional three-letter currency code and write it "
            "before the amount, leaving calls without one unchanged.",
    criteria=('format_amount(123456, currency="EUR") returns "EUR 1,234.56"',
              'format_amount(123456) still returns "1,234.56"',
              'format_amount(100, currency="euro") raises ValueError'),
    interface={"name": "format_amount",
               "signature": "invoice.money.format_amount(cents: int, currency: str | None = None) -> str",
               "description": "raises ValueError for a currency that is not a three-letter code in capitals"},
    fix=FIX,
    qc=QC,
    hidden=HIDDEN,
    wheels=(NUMFMT,),
)
