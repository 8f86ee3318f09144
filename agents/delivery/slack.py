"""Slack's Web API, the two calls the conversations need: chat.postMessage, into a thread or as a new message that
starts one, with buttons; and chat.update, which rewrites a posted message (its buttons replaced by the decisions).

Slack answers HTTP 200 with `{"ok": false, "error": "<code>"}` for most refusals, and 429 with Retry-After when it
rate-limits; both become a HostError here, the first by its code (a few codes are Slack's own trouble and may be
retried). The bot token travels in the Authorization header only and is scrubbed from every error.
https://api.slack.com/methods/chat.postMessage https://api.slack.com/methods/chat.update
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from agents.delivery.api import HostClient, HostError, JsonApi, RequestRefused, TokenRefused

TEXT_MAX_CHARS = 3000  # a section block's text; longer answers are cut with a pointer to the web
LINE_MAX_CHARS = 2000  # a context block's text element
TOKEN_ERRORS = {"not_authed", "invalid_auth", "account_inactive", "token_revoked", "token_expired", "missing_scope",
                "not_allowed_token_type"}
SLACK_TROUBLE = {"internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited"}


@dataclass(frozen=True)
class SlackSettings:
    api_url: str  # https://slack.com/api
    token: str = field(repr=False)
    timeout_s: float = 10.0


@dataclass(frozen=True)
class Button:
    label: str
    value: str  # what a press sends back (e.g. "approval:approve:<id>"); unique in the message, so also its action_id
    style: str = ""  # "primary", "danger" or ""


Row: TypeAlias = list[Button] | str  # under the text: a row of buttons, or a line (what was decided, plain text)


class SlackClient(HostClient):
    def __init__(self, settings: SlackSettings) -> None:
        headers = {"Authorization": f"Bearer {settings.token}", "User-Agent": "aiteam-delivery"}
        self._api = JsonApi("Slack", settings.api_url, headers, secrets=[settings.token], timeout_s=settings.timeout_s)

    def post_message(self, *, channel: str, text: str, thread_ts: str = "", rows: Sequence[Row] = ()) -> dict[str, Any]:
        """Post `text` into the thread `thread_ts` of `channel` (without one: a new message of the channel, whose
        `ts` names the thread its replies start), `rows` under it; Slack's answer ({"ok": true, "channel", "ts"})."""
        body = {"channel": channel, "text": fallback(text), "blocks": blocks(text, rows), "unfurl_links": False,
                **({"thread_ts": thread_ts} if thread_ts else {})}
        return self._call("/chat.postMessage", body)

    def update_message(self, *, channel: str, ts: str, text: str, rows: Sequence[Row] = ()) -> dict[str, Any]:
        """Rewrite the message `ts` of `channel` (the channel's id, as chat.postMessage answered): its text and all
        its blocks, so a button left out is gone; Slack's answer ({"ok": true, "channel", "ts", "text"})."""
        return self._call("/chat.update", {"channel": channel, "ts": ts, "text": fallback(text),
                                           "blocks": blocks(text, rows)})

    def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self._api.request("POST", path, json=body)
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            raise refusal(f"Slack POST {path}", answer)
        return answer


def fallback(text: str) -> str:
    """The message's top-level text (what notifications and screen readers show), which Slack reads as mrkdwn: its
    three control characters escaped, so no one's words can mention @channel or a person, or forge a link. The
    blocks show the text as plain_text, which Slack does not read."""
    return clip(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def blocks(text: str, rows: Sequence[Row]) -> list[dict[str, Any]]:
    """A section with the text as plain text (a model's or a person's words: no mrkdwn links or mentions of
    theirs are rendered), then an actions block per row of buttons and a context block per line."""
    shown = [{"type": "section", "text": {"type": "plain_text", "text": clip(text) or " ", "emoji": False}}]
    for row in rows:
        shown.append({"type": "context", "elements": [{"type": "plain_text", "text": row[:LINE_MAX_CHARS],
                                                       "emoji": False}]} if isinstance(row, str)
                     else {"type": "actions", "elements": [_button(b) for b in row]})
    return shown


def clip(text: str) -> str:
    return text if len(text) <= TEXT_MAX_CHARS else text[:TEXT_MAX_CHARS - 40] + "… (the rest is on the web)"


def refusal(call: str, answer: Any) -> HostError:
    """Slack's `ok: false` as the HostError its code means: a token refused, Slack's own trouble (retryable),
    or a request refused (a channel not found, the bot not in it)."""
    code = str(answer.get("error") if isinstance(answer, dict) else "no JSON object")[:100]
    if code in TOKEN_ERRORS:
        return TokenRefused(f"{call}: {code} (the bot token was refused, or lacks chat:write)", status=401)
    if code in SLACK_TROUBLE:
        return HostError(f"{call}: {code}", status=503)
    return RequestRefused(f"{call}: {code}", status=400)


def _button(button: Button) -> dict[str, Any]:
    shown = {"type": "button", "text": {"type": "plain_text", "text": button.label}, "action_id": button.value,
             "value": button.value}
    return {**shown, "style": button.style} if button.style else shown
