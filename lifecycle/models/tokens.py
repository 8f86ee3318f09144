"""API tokens kept as a SHA-256 digest: a copy of the database holds no usable credential.

A token is 32 random bytes (43 URL-safe characters), so a fast hash is enough: there is nothing to guess
that a slow one would protect. The first characters stay in the clear as `prefix`, to find the row and to
let a person tell their tokens apart. See docs/adr/0023-hashed-api-tokens-of-our-own.md.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

PREFIX_CHARS = 8


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def digest_of(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="what the token is for, e.g. the client or machine using it")
    prefix = models.CharField(max_length=PREFIX_CHARS, db_index=True, editable=False,
                              help_text="the token's first characters, to find it and tell it apart")
    digest = models.CharField(max_length=64, unique=True, editable=False, help_text="SHA-256 of the whole token")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(blank=True, help_text="empty: AITEAM_TOKEN_TTL_DAYS from now")
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False,
                                        help_text="updated at most once a minute")
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def set_secret(self) -> str:
        """Give the row a new secret and return it: the only time the value exists outside its holder."""
        value = new_secret()
        self.prefix, self.digest = value[:PREFIX_CHARS], digest_of(value)
        return value

    def matches(self, value: str) -> bool:
        return hmac.compare_digest(self.digest, digest_of(value))

    def status(self, now: datetime) -> str:
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expires_at <= now else "active"
