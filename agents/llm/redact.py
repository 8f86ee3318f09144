"""Keep API keys out of logs, LLMCall rows, cassettes and error reports.

Every string that leaves a provider (error text, recorded request or response) goes
through `redact`. It removes the configured key by value and anything shaped like an
Anthropic key, so a key that leaks into an SDK message or a proxy's error body is caught.
"""
from __future__ import annotations

import logging
import os
import re
from typing import Any

_KEY_SHAPE = re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")
SECRET_ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
MASK = "[REDACTED]"


def _secrets() -> list[str]:
    values = (os.environ.get(name, "") for name in SECRET_ENV_VARS)
    return [v for v in values if len(v) >= 8]


def redact(value: Any) -> Any:
    """Return `value` with every secret masked; walks dicts and lists."""
    if isinstance(value, str):
        for secret in _secrets():
            value = value.replace(secret, MASK)
        return _KEY_SHAPE.sub(MASK, value)
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


class RedactingFilter(logging.Filter):
    """Logging filter installed on every handler: masks secrets in the final message."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True
