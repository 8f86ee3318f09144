"""Webhook payloads in the shapes GitHub, GitLab and Jira document (trimmed to the fields a reader would meet),
and a client that signs them the way each host does, with a real HMAC over the exact bytes sent."""
from __future__ import annotations

import hashlib
import hmac
import json
import uuid

from django.test import Client

BODY = "count_words('') raises IndexError; it should return 0 for empty or blank text."


def github_issue(action: str = "labeled", label: str = "aiteam", number: int = 42, **issue) -> dict:
    labels = [{"id": 208045946, "name": label, "color": "f29513", "default": False}]
    return {
        "action": action,
        "issue": {"url": f"https://api.github.com/repos/acme/wordcount/issues/{number}",
                  "html_url": f"https://github.com/acme/wordcount/issues/{number}", "id": 1, "number": number,
                  "title": "count_words crashes on empty input", "user": {"login": "octocat", "id": 1},
                  "labels": labels, "state": "open", "locked": False, "comments": 0, "author_association": "OWNER",
                  "body": BODY, **issue},
        "label": labels[0],
        "repository": {"id": 1296269, "full_name": "acme/wordcount", "private": False},
        "sender": {"login": "octocat", "id": 1, "type": "User"},
    }


def github_comment(text: str = "/aiteam please", association: str = "MEMBER", **issue) -> dict:
    payload = github_issue(action="created", **issue)
    del payload["label"]
    payload["comment"] = {"id": 7, "html_url": "https://github.com/acme/wordcount/issues/42#issuecomment-7",
                          "user": {"login": "maria"}, "body": text, "author_association": association}
    return payload


def gitlab_issue(previous: list[str] | None = None, current: list[str] | None = None, action: str = "update",
                 **attributes) -> dict:
    previous, current = previous if previous is not None else [], current if current is not None else ["aiteam"]
    label = lambda title: {"id": 206, "title": title, "color": "#ffffff", "project_id": 14, "type": "ProjectLabel"}  # noqa: E731
    payload = {
        "object_kind": "issue", "event_type": "issue",
        "user": {"id": 1, "name": "Administrator", "username": "root"},
        "project": {"id": 1, "name": "wordcount", "web_url": "https://gitlab.com/acme/wordcount",
                    "path_with_namespace": "acme/wordcount"},
        "object_attributes": {"id": 301, "iid": 23, "title": "count_words crashes on empty input", "description": BODY,
                              "state": "opened", "action": action,
                              "url": "https://gitlab.com/acme/wordcount/-/issues/23", **attributes},
        "labels": [label(t) for t in current],
        "changes": {"labels": {"previous": [label(t) for t in previous], "current": [label(t) for t in current]}},
    }
    return payload


def jira_issue(event: str = "jira:issue_updated", before: str = "", after: str = "aiteam", labels=None,
               description="count_words('') raises IndexError.") -> dict:
    return {
        "timestamp": 1525698237764, "webhookEvent": event, "issue_event_type_name": "issue_generic",
        "user": {"self": "https://acme.atlassian.net/rest/api/2/user?accountId=99", "displayName": "Maria"},
        "issue": {"id": "10001", "self": "https://acme.atlassian.net/rest/api/2/issue/10001", "key": "PROJ-7",
                  "fields": {"summary": "count_words crashes on empty input", "description": description,
                             "labels": labels if labels is not None else after.split(),
                             "issuetype": {"name": "Bug"}, "project": {"key": "PROJ"}}},
        "changelog": {"id": "10002", "items": [{"field": "labels", "fieldtype": "jira", "from": None,
                                                "fromString": before, "to": None, "toString": after}]},
    }


def hmac_hex(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post(url: str, payload, headers: dict[str, str]):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return Client().post(url, data=body, content_type="application/json", headers=headers)


def to_github(project, payload, *, secret: str, event: str = "issues", delivery: str | None = None, signature=None):
    body = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
               "X-Hub-Signature-256": signature if signature is not None else f"sha256={hmac_hex(secret, body)}",
               "User-Agent": "GitHub-Hookshot/abc"}
    return post(f"/webhooks/github/{project.pk}/", body, {k: v for k, v in headers.items() if v != ""})


def to_gitlab(project, payload, *, token: str, event: str = "Issue Hook", key: str | None = None, uuid_header=None):
    headers = {"X-Gitlab-Event": event, "X-Gitlab-Token": token,
               "X-Gitlab-Event-UUID": uuid_header or str(uuid.uuid4()), "Idempotency-Key": key or ""}
    return post(f"/webhooks/gitlab/{project.pk}/", payload, {k: v for k, v in headers.items() if v})


def to_jira(project, payload, *, secret: str, delivery: str | None = None, signature=None):
    body = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
    headers = {"X-Atlassian-Webhook-Identifier": delivery or str(uuid.uuid4()),
               "X-Hub-Signature": signature if signature is not None else f"sha256={hmac_hex(secret, body)}"}
    return post(f"/webhooks/jira/{project.pk}/", body, {k: v for k, v in headers.items() if v != ""})
