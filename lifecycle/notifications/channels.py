"""The channel registry: name → send(notification). Each channel raises ChannelError when it did not send."""
from __future__ import annotations

from collections.abc import Callable

from lifecycle.models import Notification
from lifecycle.notifications import email, webhook
from lifecycle.notifications.errors import ChannelError

CHANNELS: dict[str, Callable[[Notification], None]] = {"email": email.send, "webhook": webhook.send}

__all__ = ["CHANNELS", "ChannelError"]
