"""A fake of GitLab's REST API v4 (merge requests, issue notes) on a real local socket, for the host tests.

It speaks GitLab's wire protocol: `/api/v4/projects/:id/...` where :id is a number or the URL-encoded path
(`acme%2Fshop`; an unencoded slash is another route, a 404, as on GitLab), the token in `PRIVATE-TOKEN` (or
`Authorization: Bearer`), 401 `{"message": "401 Unauthorized"}` without one, 404 `{"message": "404 Project Not
Found"}`, 400 `{"error": "title is missing"}` for a missing parameter, 409 with GitLab's message for a second
open merge request from the same source branch, 400 for a title over 255 characters, and a title starting with
`Draft:` (or `[Draft]`, `(Draft)`) makes a draft. A PUT changes a merge request's state, title or description
(kept in `edits`). A test can hold the next reply past the client's timeout (`stall_next_reply`), or answer the next
calls 429 or 503 with a Retry-After (`busy_next`).
"""
from __future__ import annotations

import re
import threading
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes.json_api import Busy, RecordedRequest, json_handler_for
from tests.fakes.local_server import LocalServer

_ROUTE = re.compile(r"^/api/v4/projects/(?P<id>[^/]+)/(?P<rest>.+)$")
_MRS = re.compile(r"^merge_requests(?:/(?P<iid>\d+))?$")
_NOTES = re.compile(r"^issues/(?P<iid>\d+)/notes$")
_DRAFT = re.compile(r"^\s*(\[draft\]|\(draft\)|draft:|draft\s-\s)", re.IGNORECASE)
DESCRIPTION_MAX_CHARS = 1_048_576
TITLE_MAX_CHARS = 255


class FakeGitLabServer(Busy, LocalServer):
    """Projects exist once added (`add_project("acme/shop", issues=[3])`); inspect `merge_requests`, `notes`."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.projects: dict[str, dict[str, Any]] = {}  # path -> {"id", "issues"}
        self.merge_requests: list[dict[str, Any]] = []
        self.notes: list[dict[str, Any]] = []
        self.edits: list[tuple[int, dict[str, Any]]] = []  # (iid, the PUT's title/description) in the order taken
        self.requests: list[RecordedRequest] = []
        self._stalls: list[float] = []
        self._late: dict[int, float] = {}
        self._lock = threading.Lock()
        self._busy: list[tuple[int, str]] = []  # busy_next: 429 or 503 with a Retry-After
        super().__init__(json_handler_for(self), "fake-gitlab")

    def add_fork_merge_request(self, path: str, source_branch: str, *, fork_id: int = 999) -> dict[str, Any]:
        """A merge request someone opened from their fork into `path`, from a branch of the same name as ours."""
        project = self.projects[path]
        mr = {"id": 9000 + len(self.merge_requests), "iid": 1 + len(self.merge_requests), "project_id": project["id"],
              "title": "From a fork", "description": "", "state": "opened", "draft": False, "work_in_progress": False,
              "source_branch": source_branch, "target_branch": "main", "source_project_id": fork_id,
              "target_project_id": project["id"], "web_url": f"https://gitlab.example/{path}/-/merge_requests/0"}
        self.merge_requests.append(mr)
        return mr

    def add_project(self, path: str, *, issues: tuple[int, ...] = ()) -> int:
        with self._lock:
            self.projects[path] = {"id": len(self.projects) + 100, "issues": set(issues)}
            return self.projects[path]["id"]

    def stall_next_reply(self, seconds: float) -> None:
        """Do the next request as asked, then hold its reply for `seconds`."""
        with self._lock:
            self._stalls.append(seconds)

    def reply_delay(self, request: RecordedRequest) -> float:
        with self._lock:
            return self._late.pop(id(request), 0.0)

    def handle(self, request: RecordedRequest) -> tuple[int, Any]:
        with self._lock:
            self.requests.append(request)
            if busy := self.busy_answer(lambda m: {"message": m}):
                return busy
            if self._stalls:
                self._late[id(request)] = self._stalls.pop(0)
            token = request.headers.get("private-token") or request.headers.get("authorization", "").removeprefix("Bearer ")
            if token != self.token:
                return 401, {"message": "401 Unauthorized"}
            split = urlsplit(request.path)
            route = _ROUTE.match(split.path)
            project = self._project(unquote(route["id"])) if route else None
            if route is None or project is None:
                return 404, {"message": "404 Project Not Found"}
            if mrs := _MRS.match(route["rest"]):
                return self._merge_requests(request, project, mrs["iid"], parse_qs(split.query))
            if (notes := _NOTES.match(route["rest"])) and request.method == "POST":
                return self._note(project, int(notes["iid"]), request.body)
            return 404, {"error": "404 Not Found"}

    def _project(self, key: str) -> dict[str, Any] | None:
        by_id = {str(p["id"]): dict(p, path=path) for path, p in self.projects.items()}
        return dict(self.projects[key], path=key) if key in self.projects else by_id.get(key)

    def _merge_requests(self, request: RecordedRequest, project: dict[str, Any], iid: str | None,
                        query: dict[str, list[str]]) -> tuple[int, Any]:
        if iid is None and request.method == "GET":
            return 200, [m for m in self.merge_requests if m["project_id"] == project["id"] and _matches(m, query)]
        if iid is None and request.method == "POST":
            return self._create(project, request.body)
        found = [m for m in self.merge_requests if m["project_id"] == project["id"] and m["iid"] == int(iid or 0)]
        if not found:
            return 404, {"message": "404 Not found"}
        if request.method == "PUT" and isinstance(request.body, dict):
            return self._update(found[0], request.body)
        return 200, found[0]

    def _update(self, mr: dict[str, Any], body: dict[str, Any]) -> tuple[int, Any]:
        if too_long := _too_long(body):
            return too_long
        event = body.get("state_event")
        mr["state"] = {"close": "closed", "reopen": "opened"}.get(event, mr["state"])
        text = {k: v for k, v in body.items() if k in ("title", "description")}
        if text:
            self.edits.append((mr["iid"], text))
            mr.update(text)
            mr["draft"] = mr["work_in_progress"] = bool(_DRAFT.match(mr["title"]))
        return 200, mr

    def _create(self, project: dict[str, Any], body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict):
            return 400, {"error": "source_branch is missing, target_branch is missing, title is missing"}
        missing = [k for k in ("source_branch", "target_branch", "title") if not body.get(k)]
        if missing:
            return 400, {"error": ", ".join(f"{k} is missing" for k in missing)}
        if too_long := _too_long(body):
            return too_long
        if body["source_branch"] == body["target_branch"]:
            return 422, {"message": ["You can't use same project/branch for source and target"]}
        for mr in self.merge_requests:
            if (mr["project_id"] == project["id"] and mr["source_branch"] == body["source_branch"]
                    and mr["source_project_id"] == project["id"] and mr["state"] == "opened"):
                return 409, {"message": [f"Another open merge request already exists for this source branch: !{mr['iid']}"]}
        iid = 1 + sum(1 for m in self.merge_requests if m["project_id"] == project["id"])
        mr = {"id": 5000 + len(self.merge_requests), "iid": iid, "project_id": project["id"], "title": body["title"],
              "description": body.get("description") or "", "state": "opened", "draft": bool(_DRAFT.match(body["title"])),
              "source_branch": body["source_branch"], "target_branch": body["target_branch"],
              "source_project_id": project["id"], "target_project_id": project["id"],
              "web_url": f"https://gitlab.example/{project['path']}/-/merge_requests/{iid}"}
        mr["work_in_progress"] = mr["draft"]
        self.merge_requests.append(mr)
        return 201, mr

    def _note(self, project: dict[str, Any], iid: int, body: Any) -> tuple[int, Any]:
        if iid not in project["issues"]:
            return 404, {"message": "404 Issue Not Found"}
        if not isinstance(body, dict) or not isinstance(body.get("body"), str) or not body["body"].strip():
            return 400, {"message": {"note": ["can't be blank"]}}
        if len(body["body"]) > DESCRIPTION_MAX_CHARS:
            return 400, {"message": {"note": ["is too long (maximum is 1000000 characters)"]}}
        note = {"id": 900 + len(self.notes), "body": body["body"], "noteable_type": "Issue", "noteable_iid": iid,
                "project_id": project["id"], "system": False}
        self.notes.append(note)
        return 201, note


def _too_long(body: dict[str, Any]) -> tuple[int, Any] | None:
    if len(str(body.get("title") or "")) > TITLE_MAX_CHARS:
        return 400, {"message": {"title": [f"is too long (maximum is {TITLE_MAX_CHARS} characters)"]}}
    if len(str(body.get("description") or "")) > DESCRIPTION_MAX_CHARS:
        return 400, {"message": {"description": [f"is too long (maximum is {DESCRIPTION_MAX_CHARS} characters)"]}}
    return None


def _matches(mr: dict[str, Any], query: dict[str, list[str]]) -> bool:
    state = query.get("state", ["all"])[0]
    source = query.get("source_branch", [None])[0]
    return state in ("all", mr["state"]) and source in (None, mr["source_branch"])
