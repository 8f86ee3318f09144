"""The delivery stage's one error type, and the scrubbing that keeps credentials out of every message."""
from __future__ import annotations

import re

# userinfo of any scheme://user:password@host URL; scp-style "git@host:path" names a user, not a secret, and stays.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")


class DeliveryError(Exception):
    """An expected delivery failure (git or GitHub said no); the message is safe to store and show."""


class NoAnswer(DeliveryError):
    """The request went out but no answer came back (a timeout, a dropped connection): it may have been done."""


def strip_credentials(text: str) -> str:
    """`https://user:token@host/x` -> `https://host/x`, wherever such a URL appears in text."""
    return _USERINFO.sub(r"\1", text)


def scrub(text: str, *secrets: str) -> str:
    """strip_credentials plus any known secret replaced by ***: error bodies may echo what they were sent."""
    text = strip_credentials(text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
