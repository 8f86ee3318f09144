"""`Authorization: Token <value>`, checked against ApiToken digests (lifecycle/models/tokens.py).

DRF's TokenAuthentication parses the header (and answers 401 with `WWW-Authenticate: Token`, which
drf-spectacular documents as before); only the lookup is ours. A value that cannot be a token (wrong
length, a NUL byte, anything but URL-safe characters) is refused before the database sees it.
"""
from __future__ import annotations

import re

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from lifecycle.models import ApiToken
from lifecycle.models.tokens import PREFIX_CHARS
from lifecycle.services.tokens import token_note_use

# 43 URL-safe characters when issued here; 40 hex digits when converted from rest_framework.authtoken.
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{40,64}")


class ApiTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[object, ApiToken]:
        if not TOKEN_SHAPE.fullmatch(key):
            raise exceptions.AuthenticationFailed("Invalid token.")
        candidates = ApiToken.objects.select_related("user").filter(prefix=key[:PREFIX_CHARS])
        token = next((row for row in candidates if row.matches(key)), None)
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid token.")
        now = timezone.now()
        status = token.status(now)
        if status != "active":
            raise exceptions.AuthenticationFailed(f"Token {status}.")
        token_note_use(token=token, now=now)
        return token.user, token
