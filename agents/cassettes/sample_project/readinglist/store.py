"""The reading list on disk: one JSON file, rewritten atomically so no entry is ever lost."""
from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

from readinglist.models import Book


class DuplicateIsbn(ValueError):
    """A book with this ISBN is already on the list."""


class UnknownBook(LookupError):
    """No book with this title is on the list."""


class Store:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def books(self) -> list[Book]:
        if not self.path.exists():
            return []
        return [Book.from_dict(row) for row in json.loads(self.path.read_text(encoding="utf-8"))]

    def add(self, book: Book) -> Book:
        books = self.books()
        if book.isbn and any(other.isbn == book.isbn for other in books):
            raise DuplicateIsbn(f"ISBN {book.isbn} is already on the list")
        self._save([*books, book])
        return book

    def mark_read(self, title: str, on: date) -> Book:
        books = self.books()
        for book in books:
            if book.title.casefold() == title.strip().casefold():
                book.read_on = on
                self._save(books)
                return book
        raise UnknownBook(f"no book titled {title!r} on the list")

    def unread(self) -> list[Book]:
        return [b for b in self.books() if not b.is_read]

    def read(self) -> list[Book]:
        return sorted((b for b in self.books() if b.is_read), key=lambda b: b.read_on, reverse=True)

    def _save(self, books: list[Book]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        scratch = self.path.with_suffix(".tmp")
        scratch.write_text(json.dumps([b.to_dict() for b in books], indent=2), encoding="utf-8")
        os.replace(scratch, self.path)
