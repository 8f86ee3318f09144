"""What a verified payload says, and safe reading of its fields (a malformed one is a 400, not a 500)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lifecycle.tickets import TITLE_MAX_CHARS, Ticket

DELIVERY_ID_MAX_CHARS = 200
_KINDS = {str: "text", int: "a whole number", dict: "an object", list: "a list", type(None): "null"}


class PayloadError(ValueError):
    """The payload lacks a field its event must have, or has it with another type."""


@dataclass(frozen=True)
class Reading:
    """`event` as recorded (e.g. "issues.labeled"); a `ticket` that starts a run, or why it is `ignored`."""

    event: str
    ticket: Ticket | None = None
    ignored: str = ""


def field(data: Any, *path: str, kind: type | tuple[type, ...] = str) -> Any:
    """data[path[0]][path[1]]…, which must be a `kind`."""
    value = data
    for name in path:
        if not isinstance(value, dict) or name not in value:
            raise PayloadError(f"the payload has no {'.'.join(path)}")
        value = value[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        names = [_KINDS.get(k, k.__name__) for k in (kind if isinstance(kind, tuple) else (kind,))]
        raise PayloadError(f"the payload's {'.'.join(path)} is not {' or '.join(names)}")
    return value


def optional_text(data: Any, *path: str) -> str:
    """A text field a host sends as null when it is empty (an issue without a description)."""
    try:
        return field(data, *path, kind=(str, type(None))) or ""
    except PayloadError:
        return ""


def ticket(source: str, key: str, title: str, body: str, url: str, repository_id: str = "") -> Ticket:
    return Ticket(source=source, key=key, title=title.strip()[:TITLE_MAX_CHARS], body=body, url=url,
                  repository_id=repository_id)


def delivery_id(value: str | None) -> str:
    """A delivery id header, which must be there and short and printable (it is stored and compared)."""
    if not value or len(value) > DELIVERY_ID_MAX_CHARS or not value.isprintable():
        raise PayloadError(f"the delivery id header is missing or not 1 to {DELIVERY_ID_MAX_CHARS} printable characters")
    return value
