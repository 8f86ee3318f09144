"""Issue, use and revoke API tokens. A value exists once, in what token_issue returns; the row keeps a digest."""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from lifecycle.models import ApiToken

USE_RECORDED_EVERY = timedelta(minutes=1)  # a write per minute per token, not one per request


def default_expiry(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) + timedelta(days=settings.AITEAM_TOKEN_TTL_DAYS)


def token_issue(*, token: ApiToken) -> str:
    """Save a new token (its user and name set; the expiry defaulted) and return its value, to show once."""
    value = token.set_secret()
    if token.expires_at is None:
        token.expires_at = default_expiry()
    token.save()
    return value


def token_revoke(*, token_ids: Iterable[int], now: datetime | None = None) -> int:
    """Revoke those not revoked yet; returns how many were. Revoked rows stay, for the record."""
    return ApiToken.objects.filter(pk__in=list(token_ids), revoked_at__isnull=True).update(
        revoked_at=now or timezone.now())


def token_note_use(*, token: ApiToken, now: datetime) -> None:
    stale = now - USE_RECORDED_EVERY
    if token.last_used_at is None or token.last_used_at <= stale:
        ApiToken.objects.filter(Q(last_used_at__isnull=True) | Q(last_used_at__lte=stale), pk=token.pk).update(
            last_used_at=now)
        token.last_used_at = now
