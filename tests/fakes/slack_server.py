"""A fake of Slack on a real local socket: its Web API's chat.postMessage and chat.update, and Slack's side of the
Events API and interactive payloads (a request signed as Slack signs them).

Like Slack: `POST /api/chat.postMessage` with `Authorization: Bearer <token>` and a JSON body answers HTTP 200 with
`{"ok": true, "channel", "ts", "message"}`; a wrong or missing token `{"ok": false, "error": "invalid_auth"}` (or
"not_authed"), an unknown channel "channel_not_found", a body without text or blocks "no_text"; `rate_limit_next`
answers 429 with Retry-After. `POST /api/chat.update` (channel, ts, text, blocks) rewrites a posted message and
answers `{"ok": true, "channel", "ts", "text", "message"}`; a ts it never answered a post with in that channel
"message_not_found" (as a message deleted since). Signing: `X-Slack-Signature: v0=<hex HMAC-SHA256 of
"v0:{timestamp}:{body}">` with `X-Slack-Request-Timestamp`. https://api.slack.com/authentication/verifying-requests-from-slack
"""
from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from typing import Any
from urllib.parse import urlencode

from tests.fakes.json_api import RecordedRequest, json_handler_for
from tests.fakes.local_server import LocalServer


class FakeSlackServer(LocalServer):
    """Channels exist once added (`add_channel("C1")`); inspect `posted` (the bodies of the messages posted),
    `updated` (the bodies of chat.update calls that succeeded) and `messages` ((channel, ts) → the body shown now)."""

    def __init__(self, token: str, signing_secret: str = "") -> None:
        self.token, self.signing_secret = token, signing_secret
        self.channels: set[str] = set()
        self.posted: list[dict[str, Any]] = []
        self.updated: list[dict[str, Any]] = []
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[RecordedRequest] = []
        self._rate_limited = 0
        self._retry_after = "1"
        self._ts = itertools.count(1)
        self._lock = threading.Lock()
        super().__init__(json_handler_for(self), "fake-slack")

    @property
    def api_url(self) -> str:
        return f"{self.url}/api"

    def add_channel(self, channel: str) -> None:
        with self._lock:
            self.channels.add(channel)

    def rate_limit_next(self, times: int = 1, *, retry_after: str = "1") -> None:
        """The next `times` calls answer 429 ratelimited with this Retry-After, as Slack's rate limits do."""
        with self._lock:
            self._rate_limited += times
            self._retry_after = retry_after

    def reply_delay(self, request: RecordedRequest) -> float:
        return 0.0

    def handle(self, request: RecordedRequest) -> tuple[Any, ...]:
        with self._lock:
            self.requests.append(request)
            if self._rate_limited:
                self._rate_limited -= 1
                return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": self._retry_after}
            method = {"/api/chat.postMessage": self._post, "/api/chat.update": self._update}.get(request.path)
            if request.method != "POST" or method is None:
                return 404, b"", {}
            auth = request.headers.get("authorization", "")
            if not auth:
                return 200, {"ok": False, "error": "not_authed"}
            if auth != f"Bearer {self.token}":
                return 200, {"ok": False, "error": "invalid_auth"}
            return 200, method(request.body if isinstance(request.body, dict) else {})

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("channel") not in self.channels:
            return {"ok": False, "error": "channel_not_found"}
        if not body.get("text") and not body.get("blocks"):
            return {"ok": False, "error": "no_text"}
        ts = f"{1_700_000_000 + next(self._ts)}.000100"
        self.posted.append(body)
        self.messages[(body["channel"], ts)] = body
        return {"ok": True, "channel": body["channel"], "ts": ts,
                "message": {"type": "message", "text": body.get("text", ""), "ts": ts, "bot_id": "B0BOT",
                            **({"thread_ts": body["thread_ts"]} if body.get("thread_ts") else {})}}

    def forget(self, channel: str, ts: str) -> None:
        """The message is deleted (by a person, or Slack's retention): updating it is message_not_found."""
        with self._lock:
            self.messages.pop((channel, ts), None)

    def _update(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("channel") not in self.channels:
            return {"ok": False, "error": "channel_not_found"}
        key = (body["channel"], str(body.get("ts") or ""))
        if key not in self.messages:
            return {"ok": False, "error": "message_not_found"}
        if not body.get("text") and not body.get("blocks"):
            return {"ok": False, "error": "no_text"}
        shown = {**self.messages[key], **{k: body[k] for k in ("text", "blocks") if k in body}}
        self.messages[key] = shown
        self.updated.append(body)
        return {"ok": True, "channel": key[0], "ts": key[1], "text": shown.get("text", ""),
                "message": {"type": "message", "text": shown.get("text", ""), "bot_id": "B0BOT",
                            "blocks": shown.get("blocks", [])}}

    # Slack's side of inbound requests

    def signed(self, body: bytes, *, at: float | None = None, secret: str | None = None) -> dict[str, str]:
        """The headers Slack sends with `body`, signed at `at` (now) with the signing secret (or `secret`)."""
        timestamp = str(int(time.time() if at is None else at))
        digest = hmac.new((self.signing_secret if secret is None else secret).encode(),
                          b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
        return {"HTTP_X_SLACK_REQUEST_TIMESTAMP": timestamp, "HTTP_X_SLACK_SIGNATURE": f"v0={digest}"}


def event_body(team: str, event: dict[str, Any], event_id: str = "Ev01") -> bytes:
    """An Events API event_callback, as Slack posts it (application/json)."""
    return json.dumps({"token": "deprecated-verification-token", "team_id": team, "api_app_id": "A0APP",
                       "type": "event_callback", "event_id": event_id, "event_time": int(time.time()),
                       "event": event}).encode()


def actions_body(team: str, user: str, value: str, *, channel: str = "C1", thread_ts: str = "") -> bytes:
    """An interactive block_actions payload for a button press, form-encoded as Slack posts it (payload=<JSON>)."""
    payload = {"type": "block_actions", "team": {"id": team, "domain": "acme"},
               "user": {"id": user, "username": user.lower(), "team_id": team},
               "channel": {"id": channel}, "container": {"type": "message", "channel_id": channel,
                                                         "thread_ts": thread_ts},
               "response_url": "https://hooks.slack.invalid/actions/T/1/x", "trigger_id": "1.2.3",
               "actions": [{"type": "button", "action_id": value, "value": value, "block_id": "b1",
                            "action_ts": str(time.time())}]}
    return urlencode({"payload": json.dumps(payload)}).encode()
