"""The one call of Jira Cloud's REST API (v3) that delivery needs: a comment on the ticket.

Jira Cloud's REST API v3 (the version that takes Atlassian Document Format) authenticates a script with basic
auth: the account's e-mail and an API token. The e-mail is not a secret and lives in the project's settings; the
token is read from an allow-listed environment variable like every other host token. Both the token and the
encoded header value are scrubbed from every error, since a proxy or the host may echo either.
"""
from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

from agents.delivery.api import HostClient, JsonApi
from agents.delivery.errors import DeliveryError

KEY = re.compile(r"^[A-Z][A-Z0-9_]{0,49}-[1-9][0-9]{0,9}$")  # PROJ-7, as ticket intake accepts it
_EMAIL = re.compile(r"^[^\s:@]+@[^\s:@]+$")


@dataclass(frozen=True)
class JiraSettings:
    site_url: str  # https://acme.atlassian.net
    email: str
    token: str = field(repr=False)
    timeout_s: float = 30.0


class JiraClient(HostClient):
    def __init__(self, email: str, token: str, *, site_url: str, timeout_s: float = 30.0) -> None:
        if not _EMAIL.match(email):
            raise DeliveryError("Jira's basic auth needs the account's e-mail address (no spaces or ':')")
        credential = basic_credential(email, token)
        headers = {"Authorization": f"Basic {credential}", "Accept": "application/json", "User-Agent": "aiteam-delivery"}
        self._api = JsonApi("Jira", f"{site_url.rstrip('/')}/rest/api/3", headers, secrets=[token, credential],
                            timeout_s=timeout_s)

    @classmethod
    def from_settings(cls, settings: JiraSettings) -> JiraClient:
        return cls(settings.email, settings.token, site_url=settings.site_url, timeout_s=settings.timeout_s)

    def add_comment(self, key: str, document: dict[str, Any]) -> dict[str, Any]:
        """A comment whose body is the ADF `document` on issue `key`; Jira answers 201 with the comment."""
        if not KEY.match(key):
            raise DeliveryError(f"not a Jira issue key (PROJ-7): {key!r}")
        return self._api.request("POST", f"/issue/{key}/comment", json={"body": document})


def basic_credential(email: str, token: str) -> str:
    """The value after "Basic " (base64 of e-mail:token): a secret as much as the token, scrubbed like it."""
    return base64.b64encode(f"{email}:{token}".encode()).decode()
