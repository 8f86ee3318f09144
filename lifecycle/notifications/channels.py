"""The channel registry: name → send(notification). Each channel raises ChannelError when it did not send."""
from __future__ import annotations

from collections.abc import Callable

from lifecycle import ticket_comments
from lifecycle.models import Notification
from lifecycle.notifications import email, slack, slack_updates, webhook
from lifecycle.notifications.errors import ChannelError

# "slack": a post into a conversation's Slack thread, its rows made by lifecycle.notifications.slack
# "slack_update": that post rewritten once what its buttons decide is decided (lifecycle.notifications.slack_updates)
# "ticket": a comment on the requirement's ticket, its rows made by lifecycle.ticket_comments from outbox events
CHANNELS: dict[str, Callable[[Notification], None]] = {"email": email.send, "webhook": webhook.send,
                                                       "ticket": ticket_comments.send, "slack": slack.send,
                                                       "slack_update": slack_updates.send}

__all__ = ["CHANNELS", "ChannelError"]
