"""E-mail through Django's mail backend (SMTP in production, locmem in tests, console when embedded)."""
from __future__ import annotations

from django.conf import settings
from django.core.mail import EmailMessage

from lifecycle.models import Notification
from lifecycle.notifications.errors import ChannelError


def send(notification: Notification) -> None:
    message = EmailMessage(subject=notification.subject, body=notification.body,
                           from_email=settings.DEFAULT_FROM_EMAIL, to=[notification.recipient])
    try:
        sent = message.send(fail_silently=False)
    except Exception as exc:  # the backend's own errors (SMTP, socket) are all "not sent"
        raise ChannelError(f"e-mail to {notification.recipient} failed: {type(exc).__name__}: {exc}") from exc
    if sent != 1:
        raise ChannelError(f"the mail backend accepted no message for {notification.recipient}")
