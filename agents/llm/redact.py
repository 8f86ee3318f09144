"""Keep API keys out of logs, LLMCall rows, cassettes, error reports and the conversations' rows.

Every string that leaves a provider (error text, recorded request or response) goes
through `redact`. It removes the configured key by value and anything shaped like a
prefixed key: Anthropic's (`sk-ant-`), GitHub's (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`,
`github_pat_`), GitLab's (`glpat-`), Slack's (`xoxb-`, `xoxp-`...). So a key that leaks into
an SDK message or a proxy's error body is caught. `recorded` also drops NUL characters, which PostgreSQL's text and
jsonb columns refuse and a model may emit.

`typed` is for what people type and the assistant answers them (conversation messages,
tool calls, requests to approve, the assistant's model calls): it also masks aiteam's own
API tokens, which have no prefix (`secrets.token_urlsafe(32)`: 43 URL-safe characters,
lowercase and uppercase among them; a run of exactly that length standing alone, not part
of a path, a dotted JWT or padded base64). Not the pipeline's model calls: code may hold
such a run (a 43-character CamelCase name), and a replay must get back what was answered.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from typing import Any

_PREFIXED = (r"sk-ant-[A-Za-z0-9_\-]{8,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_\-.]{20,}"
             r"|xox[abpre]-[A-Za-z0-9\-]{10,}")  # the last: Slack's bot, user and app tokens
_API_TOKEN = (r"(?<![A-Za-z0-9_\-./+])(?=[A-Za-z0-9_\-]{0,42}[a-z])(?=[A-Za-z0-9_\-]{0,42}[A-Z])"
              r"[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-/+=])")
_KEY_SHAPE = re.compile(_PREFIXED)
_TYPED_SHAPE = re.compile(f"{_PREFIXED}|{_API_TOKEN}")
SECRET_ENV_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
MASK = "[REDACTED]"


def _secrets() -> list[str]:
    values = (os.environ.get(name, "") for name in SECRET_ENV_VARS)
    return [v for v in values if len(v) >= 8]


def _masked(text: str, shape: re.Pattern = _KEY_SHAPE) -> str:
    for secret in _secrets():
        text = text.replace(secret, MASK)
    return shape.sub(MASK, text)


def redact(value: Any) -> Any:
    """Return `value` with every secret masked; walks dicts and lists."""
    return _walk(value, _masked, keys=False)


def recorded(value: Any) -> Any:
    """`value` as a row may keep it: secrets masked, NUL characters dropped, in dict keys too."""
    return _walk(value, lambda text: _masked(text).replace("\x00", ""), keys=True)


def typed(value: Any) -> Any:
    """`recorded`, and aiteam's API tokens masked too: for what people type and the assistant's answers to them."""
    return _walk(value, lambda text: _masked(text, _TYPED_SHAPE).replace("\x00", ""), keys=True)


def _walk(value: Any, clean: Callable[[str], str], *, keys: bool) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean(k) if keys and isinstance(k, str) else k: _walk(v, clean, keys=keys) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_walk(v, clean, keys=keys) for v in value]
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
