"""A fake of Jira Cloud's REST API v3 issue comments on a real local socket, for the host tests.

Like Jira Cloud: basic auth with an account's e-mail and an API token (401 otherwise), `POST
/rest/api/3/issue/{key}/comment` with `{"body": <Atlassian Document Format>}` answers 201 with the comment, an
unknown issue a 404 `{"errorMessages": ["Issue does not exist or you do not have permission to see it."]}`, and
a body that is not a valid ADF document a 400 `{"errorMessages": [], "errors": {"comment": ...}}`. The ADF check
covers what the client sends: a doc of paragraphs of text and hardBreak nodes, with the `link` (an http(s) href)
and `code` marks.
"""
from __future__ import annotations

import base64
import re
import threading
from typing import Any

from tests.fakes.json_api import Busy, RecordedRequest, json_handler_for
from tests.fakes.local_server import LocalServer

_COMMENT = re.compile(r"^/rest/api/3/issue/(?P<key>[^/?]+)/comment$")
_NOT_FOUND = "Issue does not exist or you do not have permission to see it."
COMMENT_MAX_CHARS = 32_767  # Jira's default limit for a text field


class FakeJiraServer(Busy, LocalServer):
    """Issues exist once added (`add_issue("PROJ-7")`); inspect `comments`; `stall_next_reply` holds a reply;
    `busy_next` answers 429 or 503 with a Retry-After."""

    def __init__(self, email: str, token: str) -> None:
        self.expected = "Basic " + base64.b64encode(f"{email}:{token}".encode()).decode()
        self.issues: set[str] = set()
        self.comments: list[dict[str, Any]] = []
        self.requests: list[RecordedRequest] = []
        self._stalls: list[float] = []
        self._late: dict[int, float] = {}
        self._lock = threading.Lock()
        self._busy: list[tuple[int, str]] = []  # busy_next: 429 or 503 with a Retry-After
        super().__init__(json_handler_for(self), "fake-jira")

    def add_issue(self, key: str) -> None:
        with self._lock:
            self.issues.add(key)

    def stall_next_reply(self, seconds: float) -> None:
        with self._lock:
            self._stalls.append(seconds)

    def reply_delay(self, request: RecordedRequest) -> float:
        with self._lock:
            return self._late.pop(id(request), 0.0)

    def handle(self, request: RecordedRequest) -> tuple[int, Any]:
        with self._lock:
            self.requests.append(request)
            if busy := self.busy_answer(lambda m: {"errorMessages": [m], "errors": {}}):
                return busy
            if self._stalls:
                self._late[id(request)] = self._stalls.pop(0)
            if request.headers.get("authorization") != self.expected:
                return 401, {"errorMessages": ["You are not authenticated. Authentication required to perform this operation."],
                             "errors": {}}
            match = _COMMENT.match(request.path)
            if match is None or request.method != "POST":
                return 404, {"errorMessages": ["null for uri: " + request.path], "errors": {}}
            if match["key"] not in self.issues:
                return 404, {"errorMessages": [_NOT_FOUND], "errors": {}}
            body = request.body.get("body") if isinstance(request.body, dict) else None
            if problem := adf_problem(body):
                return 400, {"errorMessages": [], "errors": {"comment": f"Comment body is not valid: {problem}"}}
            comment = {"id": str(10000 + len(self.comments)), "issue": match["key"], "body": body,
                       "self": f"{self.url}/rest/api/3/issue/{match['key']}/comment/{10000 + len(self.comments)}"}
            self.comments.append(comment)
            return 201, comment


def adf_problem(doc: Any) -> str | None:
    """Why `doc` is not an ADF document of the shape this fake accepts, or None."""
    if not isinstance(doc, dict) or doc.get("type") != "doc" or doc.get("version") != 1:
        return "not a doc of version 1"
    paragraphs = doc.get("content")
    if not isinstance(paragraphs, list) or not paragraphs:
        return "a doc needs content"
    for paragraph in paragraphs:
        if not isinstance(paragraph, dict) or paragraph.get("type") != "paragraph":
            return "only paragraphs are expected"
        for node in paragraph.get("content") or []:
            if problem := _text_problem(node):
                return problem
    if len(plain_text(doc)) > COMMENT_MAX_CHARS:
        return f"longer than {COMMENT_MAX_CHARS} characters"
    return None


def plain_text(doc: dict[str, Any]) -> str:
    return "\n".join("".join(n.get("text", "\n") for n in p.get("content") or []) for p in doc["content"])


def _text_problem(node: Any) -> str | None:
    if isinstance(node, dict) and node.get("type") == "hardBreak" and set(node) == {"type"}:
        return None
    if not isinstance(node, dict) or node.get("type") != "text" or not isinstance(node.get("text"), str) or not node["text"]:
        return "a paragraph holds text nodes with non-empty text"
    for mark in node.get("marks") or []:
        if mark.get("type") == "link" and re.match(r"^https?://", str((mark.get("attrs") or {}).get("href", ""))):
            continue
        if mark.get("type") != "code":
            return f"mark {mark.get('type')!r} is not allowed here"
    return None
