"""A git host over HTTPS on 127.0.0.1: git's own `git http-backend` behind a token check, for the mirror tests.

Smart HTTP as GitHub and GitLab serve it (fetch and push), with TLS from a throwaway self-signed certificate
(remotes must be https), so the token's path through git's environment is tested end to end: a request without
`Authorization: Basic <user:token>` is answered 401, as a host does. Every request is recorded (method, path with
query, the Authorization header) so a test can see the token went in a header and nowhere else. A repository
moved at the host (`moved={"old.git": "shop.git"}`) answers 301 to its new address before any token check, as
GitHub does for a renamed repository.
"""
from __future__ import annotations

import base64
import os
import ssl
import subprocess
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

from tests.fakes.local_server import LocalServer

BACKEND = ("git", "http-backend")


@dataclass(frozen=True)
class GitRequest:
    method: str
    path: str  # with the query, as the client sent it
    authorization: str


def self_signed(directory: Path) -> tuple[Path, Path]:
    """(certificate, key) for 127.0.0.1, valid a day; the certificate is also the CA bundle a client trusts."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=30)
    return cert, key


class GitHttpServer(LocalServer):
    """Serves the bare repositories under `root` at https://127.0.0.1:<port>/<name>.git to `user`:`token`."""

    def __init__(self, root: Path, cert: Path, key: Path, *, user: str, token: str,
                 moved: dict[str, str] | None = None) -> None:
        self.root, self.requests, self.moved = Path(root), [], dict(moved or {})
        self.expected = "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()
        handler = type("Handler", (_Handler,), {"host": self})
        super().__init__(handler, "fake-git-host")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)

    @property
    def url(self) -> str:
        return "https://" + super().url.removeprefix("http://")


class _Handler(BaseHTTPRequestHandler):
    host: GitHttpServer
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        self._serve()

    def do_POST(self) -> None:  # noqa: N802
        self._serve()

    def log_message(self, *args: object) -> None:
        pass

    def _serve(self) -> None:
        auth = self.headers.get("Authorization", "")
        self.host.requests.append(GitRequest(self.command, self.path, auth))
        name, _, rest = self.path.lstrip("/").partition("/")
        if name in self.host.moved:
            self.send_response(301)
            self.send_header("Location", f"{self.host.url}/{self.host.moved[name]}/{rest}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if auth != self.host.expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="fake git host"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        status, headers, body = self._backend(self._body())
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        # a length, so the client never reads to a close that TLS would call unclean
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        chunks = []
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            chunks.append(self.rfile.read(size))
            self.rfile.readline()
        self.rfile.readline()
        return b"".join(chunks)

    def _backend(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        """One CGI call of git http-backend; REMOTE_USER set so that it takes pushes too."""
        parts = urlsplit(self.path)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_PROJECT_ROOT": str(self.host.root),
               "GIT_HTTP_EXPORT_ALL": "1", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
               "PATH_INFO": parts.path, "QUERY_STRING": parts.query, "REQUEST_METHOD": self.command,
               "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
               "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""), "REMOTE_USER": "tester",
               "REMOTE_ADDR": "127.0.0.1", "GIT_PROTOCOL": self.headers.get("Git-Protocol", "")}
        done = subprocess.run(BACKEND, input=body, env=env, capture_output=True, timeout=60, check=False)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        headers = [tuple(p.strip() for p in line.split(":", 1)) for line in head.decode().split("\r\n") if ":" in line]
        status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
        return status, [(k, v) for k, v in headers if k.lower() != "status"], payload
