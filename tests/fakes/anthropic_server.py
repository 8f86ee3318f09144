"""A scripted fake of the Anthropic Messages API on a real local socket.

The SDK talks through httpx2, which respx cannot intercept, so the adapter tests point
the real client (via ANTHROPIC_BASE_URL) at this server. Each POST /v1/messages is
recorded, then answered with the next queued reply, or else by the responder a caller set (`respond_with`);
with neither, a non-retryable 400, so a test that forgot to script a reply fails loudly, not slowly. Like the API,
it speaks HTTP/1.1 and keeps a connection open between requests; each request records the client connection it
came on (`peer`), so a test can see a client reuse one.

A reply's usage is what the API would report for that request: its cache reads and writes by prefix up to each
cache_control breakpoint, with the model's minimum and the 5-minute lifetime (tests/fakes/prompt_cache.py); a
scripted `usage` overrides it. More than 4 breakpoints is the API's 400.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.local_server import LocalServer
from tests.fakes.prompt_cache import PromptCache, TooManyBreakpoints

DEFAULT_USAGE = {"output_tokens": 7}
# A responder answers from the request body: (tool name or None for the forced one, tool input).
Responder = Callable[[dict[str, Any]], tuple[str | None, dict[str, Any]]]
FAKE_MODEL = "claude-fake-1"


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]
    peer: tuple[str, int]  # the client's address and port: one per connection


@dataclass(frozen=True)
class _Reply:
    status: int = 200
    body: dict[str, Any] | None = None  # None: build a tool_use message from tool_input
    tool_input: dict[str, Any] = field(default_factory=dict)
    tool_name: str | None = None
    usage: dict[str, int | None] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    stop_reason: str = "tool_use"


class FakeAnthropicServer(LocalServer):
    """Start with `start()` (or `with`), script replies with `enqueue_*`, inspect `requests`."""

    def __init__(self, cache: PromptCache | None = None) -> None:
        self.requests: list[RecordedRequest] = []
        self.cache = cache or PromptCache()
        self._responder: Responder | None = None
        self._replies: deque[_Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._ids = itertools.count(1)
        super().__init__(_handler_for(self), "fake-anthropic")

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a delay
        super().stop()
        for connection in list(self._connections):  # kept alive: a stopped server answers nothing more on them
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def enqueue_tool_use(
        self, tool_input: dict[str, Any], name: str | None = None, usage: dict[str, int | None] | None = None,
        stop_reason: str = "tool_use",
    ) -> None:
        """Answer with one tool_use block; `name` defaults to the tool the request forced; stop_reason
        "max_tokens" is an answer cut off at the request's limit."""
        self._push(_Reply(tool_input=tool_input, tool_name=name, usage=usage or {}, stop_reason=stop_reason))

    def enqueue_status(self, status: int, body_json: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        """Answer with an error status, e.g. 529 overloaded_error or 429 with retry-after."""
        self._push(_Reply(status=status, body=body_json, headers=headers or {}))

    def enqueue_delay(self, seconds: float, then: dict[str, Any] | None = None) -> None:
        """Hold the request `seconds` before answering a tool_use with input `then`; longer than
        the client's timeout, it makes that attempt time out."""
        self._push(_Reply(tool_input=then or {}, delay=seconds))

    def respond_with(self, responder: Responder) -> None:
        """Answer every request the queue does not with `responder(body)`'s tool call (a whole run, e.g.)."""
        self._responder = responder

    def _push(self, reply: _Reply) -> None:
        with self._lock:
            self._replies.append(reply)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_reply(self, request: RecordedRequest) -> _Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        if self._responder is not None:
            name, tool_input = self._responder(request.body)
            return _Reply(tool_input=tool_input, tool_name=name)
        error = {"type": "invalid_request_error", "message": "fake server: no scripted reply left"}
        return _Reply(status=400, body={"type": "error", "error": error})

    def _message(self, reply: _Reply, request: RecordedRequest, usage: dict[str, int]) -> dict[str, Any]:
        forced = request.body.get("tool_choice") or {}
        block = {
            "type": "tool_use",
            "id": f"toolu_fake{next(self._ids):04d}",
            "name": reply.tool_name or forced.get("name", "tool"),
            "input": reply.tool_input,
        }
        return {
            "id": f"msg_fake{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": request.body.get("model", FAKE_MODEL),
            "content": [block],
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": {**DEFAULT_USAGE, **usage, **reply.usage},
        }


def _handler_for(fake: FakeAnthropicServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: every answer has a content-length
        # The body goes out as a second write: with Nagle's algorithm on a kept-alive connection it would wait
        # for the client's delayed ACK of the headers (tens of ms per request).
        disable_nagle_algorithm = True

        def setup(self) -> None:
            super().setup()
            fake._connections.add(self.connection)

        def finish(self) -> None:
            fake._connections.discard(self.connection)
            super().finish()

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            headers = {k.lower(): v for k, v in self.headers.items()}
            request = RecordedRequest(path=self.path, headers=headers, body=json.loads(raw or b"{}"),
                                      peer=self.client_address[:2])
            fake._record(request)
            if self.path.split("?")[0] != "/v1/messages":
                self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}}, {})
                return
            reply = fake._next_reply(request)
            if reply.delay and fake._stopping.wait(reply.delay):
                return
            if reply.body is not None:
                self._send(reply.status, reply.body, reply.headers)
                return
            try:
                usage = fake.cache.usage(request.body)
            except TooManyBreakpoints as exc:
                error = {"type": "invalid_request_error", "message": str(exc)}
                self._send(400, {"type": "error", "error": error}, {})
                return
            self._send(reply.status, fake._message(reply, request, usage), reply.headers)

        def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
            payload = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.send_header("request-id", f"req_fake{next(fake._ids):04d}")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout); nothing to answer

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler
