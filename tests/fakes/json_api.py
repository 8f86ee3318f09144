"""The HTTP side shared by the fakes of host APIs (GitHub, GitLab, Jira): read a JSON request, record it, answer.

A fake implements `handle(request) -> (status, body)` and `reply_delay(request) -> seconds`; this module turns
that into a request handler for LocalServer. Bodies that are not JSON are recorded as None with `raw` kept, so a
fake can answer 400 to them as the real hosts do.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str  # with the query, as sent (percent-escapes kept)
    headers: dict[str, str]  # names lower-cased
    body: Any
    raw: bytes = b""


class JsonFake(Protocol):
    def handle(self, request: RecordedRequest) -> tuple[Any, ...]: ...  # (status, body) or (status, body, headers)

    def reply_delay(self, request: RecordedRequest) -> float: ...


class Busy:
    """A host that is busy for its next calls, as each real host can be: 429 (rate limited) or 503 (unavailable)
    with a Retry-After, before it looks at the request. A fake sets `_busy = []` and `_lock`, and asks
    `busy_answer` first in its `handle`, under its lock."""

    _lock: threading.Lock
    _busy: list[tuple[int, str]]

    def busy_next(self, status: int = 429, *, retry_after: str = "1", times: int = 1) -> None:
        with self._lock:
            self._busy += [(status, retry_after)] * times

    def busy_answer(self, shape: Callable[[str], Any]) -> tuple[int, Any, dict[str, str]] | None:
        """The busy host's answer, its body `shape(message)` (the host's own error shape), or None when not busy."""
        if not self._busy:
            return None
        status, after = self._busy.pop(0)
        return status, shape(HTTPStatus(status).phrase), {"Retry-After": after}


def json_handler_for(fake: JsonFake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_PATCH(self) -> None:
            self._serve()

        def do_PUT(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            request = RecordedRequest(self.command, self.path, headers, _json_or_none(raw), raw)
            status, body, *more = fake.handle(request)  # a third item: headers to add to the answer
            time.sleep(fake.reply_delay(request))
            payload = body if isinstance(body, bytes) else json.dumps(body).encode()  # bytes: sent as they are
            try:
                self.send_response(status)
                for name, value in (more[0] if more else {}).items():
                    self.send_header(name, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # a stalled reply: the client gave up waiting, as the test meant it to

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
