"""A Slack-compatible incoming webhook: POST {"text": …} as JSON; any 2xx counts as sent.

The URL is a credential: it comes from the project's settings["notifications"]["webhook_url"]
or AITEAM_NOTIFY_WEBHOOK_URL at send time, and no error message repeats it (nor its host).

Who may point it where. The operator's AITEAM_NOTIFY_WEBHOOK_URL is trusted: whoever sets the
environment can reach the internal network anyway, and an internal chat server is a normal
target. A project's URL is tenant input (any organization admin edits it), so it must resolve
to public addresses only: loopback, private, link-local (169.254.169.254), shared, reserved,
multicast and unspecified addresses are refused as a permanent failure (ChannelRefused). The
connection goes to the very address that was checked (the Host header and TLS SNI/certificate
name still say the URL's host), so a second DNS answer cannot rebind it inside the network,
and redirects are never followed. AITEAM_NOTIFY_ALLOW_PRIVATE_WEBHOOKS lifts the address check
for project URLs, for a single-tenant install whose organization admins are its operators.

A send has a total deadline of AITEAM_NOTIFY_TIMEOUT_S after the name is resolved (not only
per socket read), so a server that drips its answer cannot outlast the send's claim.
"""
from __future__ import annotations

import http.client
import ipaddress
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from lifecycle.models import Notification
from lifecycle.notifications.errors import ChannelError, ChannelRefused


@dataclass(frozen=True)
class Target:
    """Where to POST: the URL's parts, and whether its address needs no check (the operator's own URL)."""

    scheme: str
    host: str
    port: int
    path: str
    trusted: bool


def webhook_url(project_settings: dict[str, Any] | None) -> str:
    return _project_url(project_settings) or str(settings.AITEAM_NOTIFY_WEBHOOK_URL or "")


def _project_url(project_settings: dict[str, Any] | None) -> str:
    notifications = (project_settings or {}).get("notifications")
    return str((notifications if isinstance(notifications, dict) else {}).get("webhook_url") or "")


def url_problem(url: str) -> str:
    """Why `url` cannot be a webhook URL ('' when it can); never repeats the URL."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        return "is malformed"
    if parts.scheme not in ("http", "https"):
        return "must start with https:// or http://"
    if not parts.hostname:
        return "has no host"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "contains spaces or control characters"
    return ""


def slack_text(subject: str, body: str) -> str:
    """Slack's three control characters escaped, so model output cannot @channel or forge links."""
    def escape(text: str) -> str:
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    return f"*{escape(subject)}*\n{escape(body)}"


def send(notification: Notification) -> None:
    project = notification.project or (notification.requirement.project if notification.requirement else None)
    target = webhook_target(project.settings if project else None)
    payload = json.dumps({"text": slack_text(notification.subject, notification.body)}).encode()
    status = post(target, checked_addresses(target), payload)
    if 300 <= status < 400:
        raise ChannelRefused(f"webhook answered HTTP {status}; redirects are not followed, configure the final URL")
    if not 200 <= status < 300:
        raise ChannelError(f"webhook answered HTTP {status}")


def webhook_target(project_settings: dict[str, Any] | None) -> Target:
    own = _project_url(project_settings)
    url = own or str(settings.AITEAM_NOTIFY_WEBHOOK_URL or "")
    if not url:
        raise ChannelError("no webhook URL is configured")
    problem = url_problem(url)
    if problem:
        raise ChannelRefused(f"the {'project' if own else 'operator'}'s webhook URL {problem}")
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(scheme=parts.scheme, host=str(parts.hostname), port=parts.port or (443 if parts.scheme == "https" else 80),
                  path=path, trusted=not own or settings.AITEAM_NOTIFY_ALLOW_PRIVATE_WEBHOOKS)


def checked_addresses(target: Target) -> list[str]:
    """The addresses to connect to, in order; for an untrusted URL every address of its host must be public."""
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):  # includes socket.gaierror; may be transient, so retried
        raise ChannelError("the webhook host could not be resolved") from None
    addresses = [str(info[4][0]) for info in infos]
    if not target.trusted:
        for address in addresses:
            reason = non_public(address)
            if reason:
                raise ChannelRefused(f"the project's webhook host resolves to a {reason} address; "
                                     "only public addresses are allowed") from None
    return list(dict.fromkeys(addresses))


def non_public(address: str) -> str:
    """Why `address` is not a public unicast address ('' when it is)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    for reason in ("loopback", "private", "link_local", "multicast", "reserved", "unspecified"):
        if getattr(ip, f"is_{reason}"):
            return reason.replace("_", "-")
    return "" if ip.is_global else "non-global"


def post(target: Target, addresses: list[str], payload: bytes) -> int:
    """POST `payload` to the first of `addresses` that answers, as `target.host`; returns the status.

    Never follows a redirect (http.client does not), and gives up AITEAM_NOTIFY_TIMEOUT_S after it starts.
    """
    timeout = settings.AITEAM_NOTIFY_TIMEOUT_S
    started = time.monotonic()
    conn = _connection(target, addresses, started + timeout)
    expired = threading.Event()

    def abort() -> None:  # the total deadline: shutting the socket down wakes a blocked read or write
        expired.set()
        if conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    watchdog = threading.Timer(timeout, abort)
    watchdog.daemon = True
    watchdog.start()
    try:
        conn.connect()  # each TCP connect gets what is left of the deadline; the TLS handshake has the watchdog
        if expired.is_set():
            raise TimeoutError
        conn.request("POST", target.path, body=payload, headers={"Content-Type": "application/json"})
        return conn.getresponse().status
    except (OSError, http.client.HTTPException, ValueError) as exc:
        timed_out = expired.is_set() or time.monotonic() - started >= timeout
        raise _channel_error(exc, f"webhook did not answer within {timeout:g}s" if timed_out else "") from None
    finally:
        watchdog.cancel()
        conn.close()


def _channel_error(exc: Exception, timed_out: str) -> ChannelError:
    """What went wrong, in words that never repeat the URL (http.client's own messages may)."""
    if timed_out:
        return ChannelError(timed_out)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return ChannelError("webhook's TLS certificate was not accepted")
    if isinstance(exc, http.client.HTTPException):
        return ChannelError(f"webhook gave a malformed answer ({type(exc).__name__})")
    if isinstance(exc, ValueError):  # http.client's InvalidURL, whose text holds the secret path
        return ChannelRefused("the webhook URL is malformed")
    return ChannelError(f"webhook unreachable: {type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}")


class _PinnedHTTP(http.client.HTTPConnection):
    """Connects only to checked addresses (never resolves the host again); the Host header still names it."""

    def __init__(self, host: str, port: int, addresses: list[str], deadline: float) -> None:
        super().__init__(host, port)
        self.addresses, self.deadline = addresses, deadline

    def connect(self) -> None:
        self.sock = _connect_first(self.addresses, self.port, self.deadline)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """Connects only to checked addresses; SNI and the certificate check use the URL's host."""

    def __init__(self, host: str, port: int, addresses: list[str], deadline: float) -> None:
        self.tls = ssl.create_default_context()
        super().__init__(host, port, context=self.tls)
        self.addresses, self.deadline = addresses, deadline

    def connect(self) -> None:
        self.sock = _connect_first(self.addresses, self.port, self.deadline)  # set first, so the watchdog can shut it
        self.sock = self.tls.wrap_socket(self.sock, server_hostname=self.host)


def _connect_first(addresses: list[str], port: int, deadline: float) -> socket.socket:
    error: OSError = ConnectionError("no address to connect to")
    for address in addresses:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        try:
            return socket.create_connection((address, port), left)  # reads and writes keep this as their timeout
        except OSError as exc:
            error = exc
    raise error


def _connection(target: Target, addresses: list[str], deadline: float) -> http.client.HTTPConnection:
    pinned = _PinnedHTTPS if target.scheme == "https" else _PinnedHTTP
    return pinned(target.host, target.port, addresses, deadline)
