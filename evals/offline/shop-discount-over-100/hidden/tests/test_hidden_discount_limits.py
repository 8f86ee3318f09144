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
