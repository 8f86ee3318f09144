from datetime import date

import pytest
from readinglist.models import Book, InvalidBook, parse_date


def test_a_book_needs_a_title_and_an_author():
    with pytest.raises(InvalidBook, match="title"):
        Book("", "Frank Herbert")
    with pytest.raises(InvalidBook, match="author"):
        Book("Dune", "  ")


def test_isbn_is_normalised_and_optional():
    assert Book("Dune", "Frank Herbert", "978-0441013593").isbn == "9780441013593"
    assert Book("Dune", "Frank Herbert").isbn is None


def test_a_book_round_trips_through_a_dict():
    book = Book("Dune", "Frank Herbert", "9780441013593", date(2026, 11, 20))
    assert Book.from_dict(book.to_dict()) == book


def test_dates_must_be_iso_8601():
    assert parse_date("2026-11-20") == date(2026, 11, 20)
    with pytest.raises(InvalidBook):
        parse_date("20/11/2026")
