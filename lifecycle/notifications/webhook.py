"""A Slack-compatible incoming webhook: POST {"text": …} as JSON; any 2xx is delivered.

The URL is a credential: it comes from the project's settings["notifications"]["webhook_url"]
or AITEAM_NOTIFY_WEBHOOK_URL at send time, and no error message repeats it.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from django.conf import settings

from lifecycle.models import Notification
from lifecycle.notifications.errors import ChannelError


def webhook_url(project_settings: dict[str, Any] | None) -> str:
    own = ((project_settings or {}).get("notifications") or {}).get("webhook_url")
    return str(own or settings.AITEAM_NOTIFY_WEBHOOK_URL or "")


def slack_text(subject: str, body: str) -> str:
    """Slack's three control characters escaped, so model output cannot @channel or forge links."""
    def escape(text: str) -> str:
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    return f"*{escape(subject)}*\n{escape(body)}"


def send(notification: Notification) -> None:
    requirement = notification.requirement
    url = webhook_url(requirement.project.settings if requirement else None)
    if not url:
        raise ChannelError("no webhook URL is configured")
    payload = json.dumps({"text": slack_text(notification.subject, notification.body)}).encode()
    request = urllib.request.Request(url, data=payload, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=settings.AITEAM_NOTIFY_TIMEOUT_S) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        raise ChannelError(f"webhook answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ChannelError(f"webhook unreachable: {getattr(exc, 'reason', exc)}") from None
    except ValueError:  # a malformed URL; its text may hold the secret path, so it is not repeated
        raise ChannelError("the webhook URL is malformed") from None
    if not 200 <= status < 300:
        raise ChannelError(f"webhook answered HTTP {status}")
