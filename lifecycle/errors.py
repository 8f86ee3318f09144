"""Domain errors. The API maps them once (lifecycle/api/errors.py); the admin shows their text."""
from __future__ import annotations

from collections.abc import Iterable

ECHO_MAX_CHARS = 100  # of a refused value an error message repeats
ECHO_MAX_NAMES = 10  # of the refused names it lists


def echoed(value: object, limit: int = ECHO_MAX_CHARS, *, quoted: bool = False) -> str:
    """`value` as an error message may repeat it: its first `limit` characters (as a repr when `quoted`), marked
    when cut, so a 1 MB value that is not a choice does not come back as a 1 MB error."""
    text = str(value)
    shown = repr(text[:limit]) if quoted else text[:limit]
    return shown if len(text) <= limit else f"{shown}… ({len(text)} characters in all)"


def echoed_names(names: Iterable[object]) -> str:
    """Refused names (unknown keys, say) for a message: the first ECHO_MAX_NAMES, each echoed, and how many more."""
    names = list(names)
    shown = ", ".join(echoed(name, quoted=True) for name in names[:ECHO_MAX_NAMES])
    return shown + (f" and {len(names) - ECHO_MAX_NAMES} more" if len(names) > ECHO_MAX_NAMES else "")


def capped(problems: list[str]) -> list[str]:
    """Problems for an error (each already short): the first ECHO_MAX_NAMES, then how many more, so a body with
    100,000 wrong keys is answered in a few lines, not one line each."""
    more = len(problems) - ECHO_MAX_NAMES
    return problems[:ECHO_MAX_NAMES] + ([f"and {more} more"] if more > 0 else [])


class DomainError(Exception):
    """The request is wrong in domain terms (HTTP 400). `field` names the input at fault."""

    status = 400

    def __init__(self, message: str, field: str = "non_field_errors") -> None:
        super().__init__(message)
        self.field = field


class KeyReused(DomainError):
    """An idempotency key came again with a different request (HTTP 422, as the IETF Idempotency-Key draft asks)."""

    status = 422


class IllegalTransition(Exception):
    """The object is not in a state that allows this (HTTP 409)."""

    code = "illegal_transition"


class StoriesChanged(IllegalTransition):
    """The stories a decision or an edit was made on changed since they were shown (HTTP 409): nothing was done."""

    code = "stories_changed"


class NotPermitted(Exception):
    """The user may see the object but not do this to it (HTTP 403)."""


class StaleStep(Exception):
    """A worker wrote with a fence or state that is no longer current; its write is refused."""


class SandboxTimedOut(Exception):
    """The sandbox killed a test run at its wall-clock limit: infrastructure, the step is retried (bounded)."""
