"""An incoming-webhook endpoint on 127.0.0.1 that misbehaves on request: a redirect, a garbled or a dripped answer.

It records every request it gets (path, Host header, body), so a test can also show that nothing arrived.
"""
from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler

from tests.fakes.local_server import LocalServer


class WebhookServer(LocalServer):
    def __init__(self, *, status: int = 200, headers: dict[str, str] | None = None, raw: bytes = b"",
                 drip_s: float = 0.0) -> None:
        """`raw`: bytes sent instead of an HTTP answer; `drip_s`: a 200 answer sent one byte every drip_s seconds."""
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.requests.append({"path": self.path, "host": self.headers.get("Host"), "body": body})
                if raw:
                    self.wfile.write(raw)
                elif drip_s:
                    try:
                        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            time.sleep(drip_s)
                    except OSError:  # the client gave up (its deadline): the point of the drip
                        pass
                else:
                    self.send_response(status)
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                self.close_connection = True

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(Handler, "fake-webhook")

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])
