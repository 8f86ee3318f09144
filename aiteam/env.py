"""Settings read from the environment through helpers that fail loudly on bad values."""
from __future__ import annotations

import json
import os
import re

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
# DRF's request rates: a count per second, minute, hour or day ("60/min", "1000/day")
_RATE = re.compile(r"[0-9]+/(s|sec|second|m|min|minute|h|hour|d|day)")


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r}: expected one of {sorted(_TRUE | _FALSE)}")


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a number") from None


def env_int(name: str, default: int) -> int:
    value = env_float(name, default)
    if value != int(value):
        raise ImproperlyConfigured(f"{name}={value!r}: expected a whole number")
    return int(value)


def env_json(name: str, default: object) -> object:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: not JSON ({exc})") from None


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default).strip()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r}: expected one of {', '.join(choices)}")
    return value


def env_rate(name: str, default: str) -> str | None:
    """A request rate such as `60/min`; `off` for no limit (None)."""
    value = os.environ.get(name, default).strip()
    if value.lower() == "off":
        return None
    if not _RATE.fullmatch(value):
        raise ImproperlyConfigured(f"{name}={value!r}: expected a rate such as 60/min (per s, min, hour or day) or off")
    return value


def env_map(name: str, default: str = "", *, values: str = "optional") -> dict[str, str]:
    """Comma-separated `KEY` or `KEY=VALUE` entries as {key: value, "" where none}, in order. `values`: "optional",
    or "required" (every entry is KEY=VALUE). An empty key or value after `=`, a missing value where one is
    required, or a key listed twice fails loudly: a binding the operator wrote must not be half read."""
    entries: dict[str, str] = {}
    for item in (part.strip() for part in os.environ.get(name, default).split(",")):
        if not item:
            continue
        key, equals, value = (piece.strip() for piece in item.partition("="))
        if not key or (equals and not value) or (values == "required" and not value):
            shape = "KEY=VALUE" if values == "required" else "KEY or KEY=VALUE"
            raise ImproperlyConfigured(f"{name}: {item!r} is not {shape}")
        if key in entries:
            raise ImproperlyConfigured(f"{name}: {key!r} is listed twice")
        entries[key] = value
    return entries
