"""Signature checks on the raw body, in constant time. Pure: the secret is passed in, never logged or returned."""
from __future__ import annotations

import hashlib
import hmac

PREFIX = "sha256="


def hmac_sha256_valid(secret: str, body: bytes, header: str | None) -> bool:
    """`header` is "sha256=<hex HMAC-SHA256 of body under secret>" (GitHub's X-Hub-Signature-256, Jira's
    X-Hub-Signature)."""
    if not secret or not header or not header.startswith(PREFIX):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    # bytes: compare_digest refuses str with non-ASCII characters (a TypeError, a 500 to anyone who sends one)
    return hmac.compare_digest(expected.encode(), header[len(PREFIX):].strip().lower().encode())


def token_valid(secret: str, header: str | None) -> bool:
    """`header` is the shared token itself (GitLab's X-Gitlab-Token)."""
    if not secret or header is None:
        return False
    return hmac.compare_digest(secret.encode(), header.encode())
