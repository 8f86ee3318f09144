"""`python -m readinglist add|read|list`: the reading list from the terminal."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from readinglist.models import Book, InvalidBook, parse_date
from readinglist.store import DuplicateIsbn, Store, UnknownBook

DEFAULT_PATH = Path(os.environ.get("READINGLIST_FILE", "~/.readinglist.json")).expanduser()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="readinglist")
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="add a book")
    add.add_argument("title")
    add.add_argument("author")
    add.add_argument("--isbn")
    read = commands.add_parser("read", help="mark a book as read")
    read.add_argument("title")
    read.add_argument("--on", required=True, help="the date you finished it, YYYY-MM-DD")
    listing = commands.add_parser("list", help="list books")
    which = listing.add_mutually_exclusive_group()
    which.add_argument("--read", action="store_true")
    which.add_argument("--unread", action="store_true")
    return parser


def main(argv: list[str] | None = None, path: Path = DEFAULT_PATH) -> int:
    args = build_parser().parse_args(argv)
    store = Store(path)
    try:
        if args.command == "add":
            book = store.add(Book(args.title, args.author, args.isbn))
            print(f"Added {book.title} — {book.author}")
        elif args.command == "read":
            book = store.mark_read(args.title, parse_date(args.on))
            print(f"Marked {book.title} as read on {book.read_on.isoformat()}")
        else:
            _list(store, read=args.read)
    except (InvalidBook, DuplicateIsbn, UnknownBook) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def _list(store: Store, *, read: bool) -> None:
    books = store.read() if read else store.unread()
    if not books:
        print("No books.")
    for book in books:
        suffix = f" (finished {book.read_on.isoformat()})" if book.read_on else ""
        print(f"{book.title} — {book.author}{suffix}")
