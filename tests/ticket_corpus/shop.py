"""A bug in a src-layout package: a discount over 100 % makes the cart's total negative."""
from tests.ticket_corpus.base import Entry

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "shop"
version = "1.2.0"
requires-python = ">=3.10"

[tool.setuptools.packages.find]
where = ["src"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""
CART_V1 = '''\
"""A shopping cart."""
from dataclasses import dataclass, field


@dataclass
class Cart:
    lines: list[tuple[str, float, int]] = field(default_factory=list)

    def add(self, name: str, price: float, quantity: int = 1) -> None:
        if quantity < 1:
            raise ValueError(f"quantity must be at least 1, not {quantity}")
        self.lines.append((name, price, quantity))

    def total(self) -> float:
        return round(sum(price * quantity for _, price, quantity in self.lines), 2)
'''
CART_V2 = CART_V1.replace('"""A shopping cart."""\n', '"""A shopping cart."""\n').replace(
    "from dataclasses import dataclass, field\n",
    "from dataclasses import dataclass, field\n\nfrom shop.discount import apply_discount\n").replace(
    '''    def total(self) -> float:
        return round(sum(price * quantity for _, price, quantity in self.lines), 2)
''', '''    def total(self, percent: float = 0) -> float:
        """The cart's total, with `percent` per cent off."""
        return apply_discount(sum(price * quantity for _, price, quantity in self.lines), percent)
''')
CART_TESTS = '''\
import pytest

from shop.cart import Cart


def test_an_empty_cart_costs_nothing():
    assert Cart().total() == 0


def test_total_adds_price_times_quantity():
    cart = Cart()
    cart.add("pen", 1.5, 2)
    cart.add("pad", 4.0)
    assert cart.total() == 7.0


def test_a_quantity_below_one_is_refused():
    with pytest.raises(ValueError):
        Cart().add("pen", 1.5, 0)
'''
DISCOUNT = '''\
"""Discount codes."""


def apply_discount(total: float, percent: float) -> float:
    """The total after taking `percent` per cent off, rounded to cents."""
    return round(total * (100 - percent) / 100, 2)
'''
DISCOUNT_TESTS = '''\
from shop.cart import Cart
from shop.discount import apply_discount


def test_ten_percent_off():
    assert apply_discount(20.0, 10) == 18.0


def test_the_cart_applies_the_discount():
    cart = Cart()
    cart.add("book", 12.5, 2)
    assert cart.total(percent=20) == 20.0
'''

FIX = {
    "reasoning": "apply_discount took any percentage, so 150 % gave a negative total. It now refuses a percentage "
                 "outside 0 to 100 with a ValueError naming it; Cart.total passes the error on unchanged.",
    "edits": [{"path": "src/shop/discount.py",
               "search": '    """The total after taking `percent` per cent off, rounded to cents."""\n',
               "replace": '    """The total after taking `percent` per cent off, rounded to cents; a percentage outside 0 to '
                          '100 is refused."""\n'
                          '    if not 0 <= percent <= 100:\n'
                          '        raise ValueError(f"a discount is between 0 and 100 per cent, not {percent}")\n'}],
    "files": [{"path": "tests/test_discount_limits.py", "content": '''\
import pytest

from shop.discount import apply_discount


@pytest.mark.parametrize("percent", [150, -5])
def test_a_percentage_outside_0_to_100_is_refused(percent):
    with pytest.raises(ValueError, match=str(percent)):
        apply_discount(20.0, percent)


def test_a_full_discount_is_free():
    assert apply_discount(20.0, 100) == 0.0
'''}],
}
QC = {
    "reasoning": "The reported case through the cart, as a customer meets it, and the refusal's wording.",
    "files": [{"path": "tests/acceptance/test_discount_over_100.py", "content": '''\
import pytest

from shop.cart import Cart
from shop.discount import apply_discount


def test_a_150_percent_code_is_refused():
    cart = Cart()
    cart.add("lamp", 20.0)
    with pytest.raises(ValueError, match="150"):
        cart.total(percent=150)


def test_a_negative_percentage_is_refused():
    with pytest.raises(ValueError):
        apply_discount(20.0, -5)
'''}],
    "coverage": {"AC-1": ["test_a_150_percent_code_is_refused"], "AC-2": ["test_a_negative_percentage_is_refused"]},
}
HIDDEN = {"tests/test_hidden_discount_limits.py": '''\
import pytest

from shop.cart import Cart
from shop.discount import apply_discount


def test_over_100_percent_is_refused():
    with pytest.raises(ValueError):
        apply_discount(10.0, 100.5)


def test_below_zero_is_refused():
    with pytest.raises(ValueError):
        apply_discount(10.0, -0.01)


def test_the_cart_never_totals_below_zero():
    cart = Cart()
    cart.add("chair", 30.0, 2)
    with pytest.raises(ValueError):
        cart.total(percent=101)
'''}

ENTRY = Entry(
    key="shop-discount-over-100",
    kind="bug",
    title="A discount over 100% gives a negative total",
    body="With the code SUPER150 (150 % off) the cart total of a 20.00 lamp is -10.00, and we refunded a customer "
         "for it. apply_discount(20.0, 150) returns -10.0. A discount must be between 0 and 100 per cent: anything "
         "else should raise ValueError saying which percentage was given, and Cart.total must not return a "
         "negative total.",
    commits=(
        ("Start the shop with a cart", {"pyproject.toml": PYPROJECT, "src/shop/__init__.py": "",
                                        "src/shop/cart.py": CART_V1, "tests/test_cart.py": CART_TESTS}),
        ("Add discount codes", {"src/shop/discount.py": DISCOUNT}),
        ("Discount the cart's total", {"src/shop/cart.py": CART_V2, "tests/test_discount.py": DISCOUNT_TESTS}),
    ),
    summary="apply_discount accepts any percentage, so a code over 100 % makes the cart's total negative; "
            "percentages outside 0 to 100 must be refused with a ValueError that names the percentage.",
    criteria=("Cart.total(percent=150) raises ValueError naming 150", "apply_discount(20.0, -5) raises ValueError"),
    interface={"name": "apply_discount", "signature": "shop.discount.apply_discount(total: float, percent: float) -> float",
               "description": "raises ValueError for a percentage outside 0 to 100"},
    fix=FIX,
    qc=QC,
    hidden=HIDDEN,
    layout="src",
)
