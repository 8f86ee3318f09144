"""Text in and out of the edit engine: paths checked, bytes decoded strictly, lines kept with their own endings."""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import NamedTuple

MAX_FILE_BYTES = 1_000_000  # a file to edit, and a file after its edits
MAX_PATH_CHARS = 300
BINARY_SNIFF_BYTES = 8000  # git's own heuristic: a NUL byte in the first 8000 bytes makes a file binary
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # as agents.repo.files.usable_path: names the index keeps


class NotText(ValueError):
    """A file the engine will not edit: binary, not UTF-8, or too large. The message says which and why."""


@dataclass(frozen=True)
class Unreadable:
    """A path that exists but is no regular file to read: a symbolic link (writing through it could leave the
    repository), a directory, a device. It counts as existing, so no answer may create, edit or delete it."""

    why: str  # "a symbolic link", "a directory", ...


class Line(NamedTuple):  # a tuple: a large file has hundreds of thousands of them
    text: str  # without its ending
    ending: str  # "\n", "\r\n", or "" for a last line without a newline


def path_problem(path: str) -> str | None:
    """Why a path the model named may not be touched, or None. Model output is untrusted: it must name a file
    inside the repository, in normal form (every later check by prefix sees the one name), never git's own."""
    if not path or len(path) > MAX_PATH_CHARS:
        return f"a path must be 1 to {MAX_PATH_CHARS} characters"
    if _CONTROL.search(path) or "\\" in path:
        return "a path may not hold control characters or backslashes (use '/')"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, written to disk, makes a name that is not UTF-8
        return "a path must be UTF-8 text"
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        return "a path must be relative to the repository root"
    parts = path.split("/")
    if ".." in parts or posixpath.normpath(path) != path or path.endswith("/"):
        return "a path must be in normal form, without '..', '.', '//' or a trailing '/'"
    if any(part.lower() == ".git" for part in parts):
        return "files under .git are git's own, not the repository's"
    return None


def decode(path: str, data: bytes | Unreadable) -> str:
    """The file's text; NotText for what a search/replace block cannot edit safely."""
    if isinstance(data, Unreadable):
        raise NotText(f"{path} is {data.why}; it cannot be edited")
    if len(data) > MAX_FILE_BYTES:
        raise NotText(f"{path} is {len(data):,} bytes, over the {MAX_FILE_BYTES:,}-byte limit for edits")
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        raise NotText(f"{path} is a binary file; it cannot be edited with search/replace blocks")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotText(f"{path} is not UTF-8 text (byte {exc.start}); it cannot be edited with search/replace "
                      "blocks") from None


def split_lines(text: str) -> list[Line]:
    """Lines on '\\n' only, as git counts them: a form feed or a lone '\\r' inside a line stays part of it."""
    parts = text.split("\n")
    last = parts.pop()  # what follows the final newline: "" for a file that ends with one
    lines = [Line(part[:-1], "\r\n") if part.endswith("\r") else Line(part, "\n") for part in parts]
    return lines + [Line(last, "")] if last else lines


def join_lines(lines: list[Line]) -> str:
    return "".join(line.text + line.ending for line in lines)


def block_lines(text: str) -> list[str]:
    """A block's text as whole lines: whichever endings the model wrote, and one final newline or none."""
    if not text:
        return []  # an empty replace removes the searched lines; "\n" is one blank line
    text = text.replace("\r\n", "\n")
    return (text[:-1] if text.endswith("\n") else text).split("\n")


def common_ending(lines: list[Line]) -> str:
    """The ending most of the file's lines use ('\\n' for a file of one line), for lines an edit adds."""
    crlf = sum(line.ending == "\r\n" for line in lines)
    lf = sum(line.ending == "\n" for line in lines)
    return "\r\n" if crlf > lf else "\n"
