"""Request rate limits (REST_FRAMEWORK's DEFAULT_THROTTLE_RATES, set from AITEAM_THROTTLE_*): per address when
anonymous, per user when signed in, and a tighter one per user on what starts work (a brief, a replay, a question
to the assistant, a review decision, a decision on an action the assistant asked for). Counts live in Django's cache,
shared by every web process when it is Redis. Over a limit: 429 with `Retry-After`."""
from __future__ import annotations

import logging

from redis.exceptions import RedisError
from rest_framework import throttling
from rest_framework.exceptions import Throttled
from rest_framework.permissions import SAFE_METHODS
from rest_framework.settings import api_settings

log = logging.getLogger(__name__)


class RatesFromSettings:
    """DRF copies the rates into its classes when it is imported; read them per request instead, so the settings
    in force are the ones that count."""

    scope: str

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES[self.scope]

    def allow_request(self, request, view) -> bool:
        """A cache that does not answer lets the request through, logged: a limit must not take the API down."""
        try:
            return super().allow_request(request, view)
        except (RedisError, OSError):
            log.warning("rate limit %s not checked: the cache did not answer", self.scope, exc_info=True)
            return True


class AnonRateThrottle(RatesFromSettings, throttling.AnonRateThrottle):
    pass


class UserRateThrottle(RatesFromSettings, throttling.UserRateThrottle):
    pass


class SubmissionRateThrottle(RatesFromSettings, throttling.UserRateThrottle):
    """Counts only the writes of the actions a view names in `submission_actions`: reading one that also takes a
    POST (a conversation's messages, polled for its answer) is an ordinary request."""

    scope = "submit"

    def allow_request(self, request, view) -> bool:
        if request.method in SAFE_METHODS or getattr(view, "action", None) not in getattr(view, "submission_actions", ()):
            return True
        return super().allow_request(request, view)


def throttle_unauthenticated(request, view) -> Throttled | None:
    """A request refused for its credentials (none, or a bad token) counts against its address's anonymous limit:
    DRF checks permissions before throttles, so without this a flood of bad tokens would never be slowed."""
    throttle = AnonRateThrottle()
    if throttle.allow_request(request, view):
        return None
    return Throttled(throttle.wait())
