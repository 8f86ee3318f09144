"""Where a human action came from, for the audit row: the address and client as the server saw them."""
from __future__ import annotations

from typing import Any

from rest_framework.throttling import BaseThrottle


def request_origin(request: Any) -> dict[str, str]:
    """REMOTE_ADDR is what connected; X-Forwarded-For is recorded as claimed (a proxy may set it), not trusted."""
    meta = request.META
    origin = {"ip": meta.get("REMOTE_ADDR", ""), "user_agent": meta.get("HTTP_USER_AGENT", "")[:200],
              "path": request.path[:200]}
    if meta.get("HTTP_X_FORWARDED_FOR"):
        origin["forwarded_for"] = meta["HTTP_X_FORWARDED_FOR"][:200]
    return origin


def client_address(request: Any) -> str:
    """The client as the rate limits and the admin's login lockout count it: REMOTE_ADDR, or with
    AITEAM_PROXY_COUNT trusted proxies in front, the client address the outermost of them recorded in
    X-Forwarded-For (entries before it are the client's own claims)."""
    return BaseThrottle().get_ident(request)
