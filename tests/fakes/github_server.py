"""A fake of GitHub's pulls and issue comments API on a real local socket, for the delivery tests.

Pull requests live in memory. Like GitHub it lists with ?head=owner:branch&state=..., refuses
(422) a second open pull request for the same head, keeps `draft`, refuses (422) a title over 256 or a body
over 65,536 characters, takes a new title and body by PATCH (kept in `edits`), and answers 401 to a wrong
token. A test can make the next creation fail (`fail_next_create(500)`, or `created=True`: the pull
request is opened, then the error answered, as from a gateway that gave up) to drive the saga's
compensation, or create the pull request and answer too late (`stall_next_create_reply(seconds)`):
the reply lost.
Issues exist once a test adds them (`add_issue`); a comment on one is kept in `comments`, one on an
unknown issue is a 404 and an empty one a 422, as on GitHub. `busy_next` answers the next calls 429 or 503 with a
Retry-After.
"""
from __future__ import annotations

import re
import threading
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.json_api import Busy, RecordedRequest, json_handler_for
from tests.fakes.local_server import LocalServer

_PULLS = re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/pulls(?:/(?P<number>\d+))?$")
_COMMENTS = re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<number>\d+)/comments$")
BODY_MAX_CHARS = 65_536  # GitHub's limit for a pull request's or a comment's body
TITLE_MAX_CHARS = 256  # GitHub's limit for a pull request's title


class FakeGitHubServer(Busy, LocalServer):
    """Start with `start()` (or `with`); point GitHubSettings.api_url at `url`; inspect `pulls`, `creations`, `requests`."""

    def __init__(self, token: str, *, html_url: str = "https://github.example") -> None:
        self.token, self.html_url = token, html_url  # html_url: where people open a pull request (github.com's part)
        self.pulls: dict[int, dict[str, Any]] = {}
        self.creations = 0  # successful POSTs only
        self.requests: list[RecordedRequest] = []
        self.issues: set[tuple[str, int]] = set()
        self.comments: list[dict[str, Any]] = []
        self.edits: list[tuple[int, dict[str, Any]]] = []  # (number, the PATCH's title/body) in the order taken
        self._failures: list[tuple[int, str, bool]] = []
        self._stalls: list[float] = []
        self._late: dict[int, float] = {}  # id(request) -> seconds its reply waits
        self._lock = threading.Lock()
        self._busy: list[tuple[int, str]] = []  # busy_next: 429 or 503 with a Retry-After
        super().__init__(json_handler_for(self), "fake-github")

    def fail_next_create(self, status: int, message: str = "fake failure", *, created: bool = False) -> None:
        with self._lock:
            self._failures.append((status, message, created))

    def stall_next_create_reply(self, seconds: float) -> None:
        """Create the next pull request as asked, then hold the reply for `seconds` (past the client's timeout)."""
        with self._lock:
            self._stalls.append(seconds)

    def reply_delay(self, request: RecordedRequest) -> float:
        with self._lock:
            return self._late.pop(id(request), 0.0)

    def add_issue(self, repo: str, number: int) -> None:
        with self._lock:
            self.issues.add((repo, number))

    def open_pulls(self, head_ref: str | None = None) -> list[dict[str, Any]]:
        return [p for p in self.pulls.values() if p["state"] == "open" and head_ref in (None, p["head"]["ref"])]

    def handle(self, request: RecordedRequest) -> tuple[int, Any]:
        with self._lock:
            self.requests.append(request)
            if busy := self.busy_answer(lambda m: {"message": m}):
                return busy
            if request.headers.get("authorization") not in (f"Bearer {self.token}", f"token {self.token}"):
                return 401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}
            split = urlsplit(request.path)
            if (comment := _COMMENTS.match(split.path)) and request.method == "POST":
                return self._comment(comment["repo"], int(comment["number"]), request.body or {})
            match = _PULLS.match(split.path)
            if match is None:
                return 404, {"message": "Not Found"}
            repo, number = match["repo"], match["number"]
            if number is None and request.method == "GET":
                return 200, self._list(repo, parse_qs(split.query))
            if number is None and request.method == "POST":
                status, body = self._create(repo, request.body or {})
                if status == 201 and self._stalls:
                    self._late[id(request)] = self._stalls.pop(0)
                return status, body
            if number is not None and int(number) in self.pulls and request.method in ("GET", "PATCH"):
                return self._update(int(number), request.body if request.method == "PATCH" else None)
            return 404, {"message": "Not Found"}

    def _list(self, repo: str, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        head = query.get("head", [None])[0]
        state = query.get("state", ["open"])[0]
        return [p for p in self.pulls.values() if p["repo"] == repo and state in ("all", p["state"])
                and head in (None, p["head"]["label"])]

    def _create(self, repo: str, body: dict[str, Any]) -> tuple[int, Any]:
        if self._failures:
            status, message, created = self._failures.pop(0)
            if created:
                self._create(repo, body)
            return status, {"message": message}
        missing = [k for k in ("head", "base", "title") if not body.get(k)]
        if missing:
            errors = [{"resource": "PullRequest", "field": f, "code": "missing_field"} for f in missing]
            return 422, {"message": "Validation Failed", "errors": errors}
        if too_long := _pull_too_long(body):
            return too_long
        owner = repo.split("/")[0]
        label = f"{owner}:{body['head']}"
        if any(p["head"]["label"] == label and p["state"] == "open" for p in self.pulls.values()):
            return 422, {"message": "Validation Failed", "errors": [{"message": f"A pull request already exists for {label}."}]}
        number = len(self.pulls) + 1
        self.pulls[number] = {
            "number": number, "state": "open", "title": body["title"], "body": body.get("body", ""), "repo": repo,
            "draft": bool(body.get("draft", False)), "head": {"ref": body["head"], "label": label}, "base": {"ref": body["base"]},
            "html_url": f"{self.html_url}/{repo}/pull/{number}", "url": f"{self.url}/repos/{repo}/pulls/{number}",
        }
        self.creations += 1
        return 201, self.pulls[number]

    def _comment(self, repo: str, number: int, body: dict[str, Any]) -> tuple[int, Any]:
        if (repo, number) not in self.issues and not (number in self.pulls and self.pulls[number]["repo"] == repo):
            return 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
        if not isinstance(body.get("body"), str) or not body["body"]:
            errors = [{"resource": "IssueComment", "code": "missing_field", "field": "body"}]
            return 422, {"message": "Validation Failed", "errors": errors}
        if len(body["body"]) > BODY_MAX_CHARS:
            return 422, _too_long("IssueComment", "body", BODY_MAX_CHARS)
        comment_id = len(self.comments) + 1
        comment = {"id": comment_id, "body": body["body"], "repo": repo, "issue": number,
                   "html_url": f"{self.html_url}/{repo}/issues/{number}#issuecomment-{comment_id}"}
        self.comments.append(comment)
        return 201, comment

    def _update(self, number: int, body: dict[str, Any] | None) -> tuple[int, Any]:
        text = {k: v for k, v in (body or {}).items() if k in ("title", "body")}
        if "title" in text and not text["title"]:
            return 422, {"message": "Validation Failed", "errors": [{"resource": "PullRequest", "field": "title",
                                                                     "code": "missing_field"}]}
        if too_long := _pull_too_long(text):
            return too_long  # a refused PATCH changes nothing, its state included
        if body and body.get("state") in ("open", "closed"):
            self.pulls[number]["state"] = body["state"]
        if text:
            self.edits.append((number, text))
            self.pulls[number].update(text)
        return 200, self.pulls[number]


def _pull_too_long(body: dict[str, Any]) -> tuple[int, Any] | None:
    for name, limit in (("title", TITLE_MAX_CHARS), ("body", BODY_MAX_CHARS)):
        if len(str(body.get(name) or "")) > limit:
            return 422, _too_long("PullRequest", name, limit)
    return None


def _too_long(resource: str, name: str, limit: int) -> dict[str, Any]:
    error = {"resource": resource, "code": "custom", "field": name,
             "message": f"{name} is too long (maximum is {limit} characters)"}
    return {"message": "Validation Failed", "errors": [error]}
