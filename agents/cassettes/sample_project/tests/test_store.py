from datetime import date

import pytest
from readinglist.models import Book
from readinglist.store import DuplicateIsbn, Store, UnknownBook


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "books.json")


def test_a_book_added_in_one_run_is_listed_in_the_next(store):
    store.add(Book("Dune", "Frank Herbert"))
    assert [b.title for b in Store(store.path).unread()] == ["Dune"]


def test_a_second_book_with_the_same_isbn_is_refused(store):
    store.add(Book("Dune", "Frank Herbert", "9780441013593"))
    with pytest.raises(DuplicateIsbn):
        store.add(Book("Dune (again)", "Frank Herbert", "978-0441013593"))
    assert len(store.books()) == 1


def test_books_without_isbn_are_never_duplicates(store):
    store.add(Book("Notes", "Anon"))
    store.add(Book("More notes", "Anon"))
    assert len(store.books()) == 2


def test_marking_a_book_read_stores_the_date(store):
    store.add(Book("Dune", "Frank Herbert"))
    store.mark_read("dune", date(2026, 11, 20))
    assert store.read()[0].read_on == date(2026, 11, 20) and store.unread() == []


def test_marking_an_unknown_book_fails_clearly(store):
    with pytest.raises(UnknownBook, match="Emma"):
        store.mark_read("Emma", date(2026, 1, 1))


def test_read_books_are_listed_most_recent_first(store):
    for title, day in (("A", 1), ("B", 3), ("C", 2)):
        store.add(Book(title, "X"))
        store.mark_read(title, date(2026, 1, day))
    assert [b.title for b in store.read()] == ["B", "C", "A"]
