"""The Book record and its validation."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date


class InvalidBook(ValueError):
    """A book without a title or an author, or with a malformed date."""


@dataclass
class Book:
    title: str
    author: str
    isbn: str | None = None
    read_on: date | None = None

    def __post_init__(self) -> None:
        for name in ("title", "author"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise InvalidBook(f"{name} is required")
            setattr(self, name, value.strip())
        self.isbn = (self.isbn or "").replace("-", "").strip() or None

    @property
    def is_read(self) -> bool:
        return self.read_on is not None

    def to_dict(self) -> dict:
        return {"title": self.title, "author": self.author, "isbn": self.isbn,
                "read_on": self.read_on.isoformat() if self.read_on else None}

    @classmethod
    def from_dict(cls, data: dict) -> Book:
        return cls(data["title"], data["author"], data.get("isbn"), parse_date(data["read_on"]) if data.get("read_on") else None)


def parse_date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except (TypeError, ValueError):
        raise InvalidBook(f"not an ISO 8601 date: {text!r}") from None
