"""A threaded HTTP server on 127.0.0.1, port chosen by the OS: the base of every fake in tests/fakes."""
from __future__ import annotations

import functools
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a handler still holding a timed-out request must not stall stop()


class LocalServer:
    def __init__(self, handler: type[BaseHTTPRequestHandler], name: str) -> None:
        self._httpd = _Server(("127.0.0.1", 0), handler)
        # A short poll keeps stop() (which waits for the next poll) from adding 0.5 s per test.
        serve = functools.partial(self._httpd.serve_forever, poll_interval=0.02)
        self._thread = threading.Thread(target=serve, name=name, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
