"""Hidden tests of the reading list: the brief's promises, judged on the delivered branch (never shown to the team)."""
from datetime import date

import pytest
from readinglist.models import Book, InvalidBook
from readinglist.store import DuplicateIsbn, Store


def test_an_isbn_written_with_dashes_is_the_same_isbn(tmp_path):
    store = Store(tmp_path / "books.json")
    store.add(Book("Dune", "Frank Herbert", "978-0441013593"))
    with pytest.raises(DuplicateIsbn):
        store.add(Book("Dune (again)", "Frank Herbert", "9780441013593"))


def test_a_book_needs_an_author(tmp_path):
    with pytest.raises(InvalidBook):
        Book("Dune", "  ")


def test_a_book_marked_read_moves_from_unread_to_read_with_its_date(tmp_path):
    store = Store(tmp_path / "books.json")
    store.add(Book("Dune", "Frank Herbert"))
    store.mark_read("dune", date(2026, 1, 2))
    reopened = Store(store.path)
    assert reopened.unread() == [] and [(b.title, b.read_on) for b in reopened.read()] == [("Dune", date(2026, 1, 2))]
