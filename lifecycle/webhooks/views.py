"""POST /webhooks/<source>/<project id>/: size, signature, JSON, event, then one service call.

Answers: 413 too large (unread); 401 for anything that is not a good signature of this project's secret (the
same for an unknown project); 400 a payload that is not what the event promises (an unpaired surrogate in any
string, an event name longer than WebhookDelivery.event holds); 202 accepted, with what became
of it ("created", "live", "repeat" or "ignored: <why>"); 422 a ticket that cannot be a requirement (its body is
longer than a brief may be, say), so the host's delivery log shows why.
"""
from __future__ import annotations

import hashlib
import json
import logging
import secrets

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from agents.delivery.remotes import repository_path
from lifecycle.api.parsers import json_problem
from lifecycle.errors import DomainError, echoed
from lifecycle.models import Project, WebhookDelivery
from lifecycle.services.tickets import Delivery, webhook_ticket_accept
from lifecycle.webhooks import github, gitlab, jira
from lifecycle.webhooks.readings import PayloadError
from lifecycle.webhooks.secret_envs import webhook_secret

logger = logging.getLogger(__name__)
SOURCES = {"github": github, "gitlab": gitlab, "jira": jira}
REPOSITORY_SETTING = {"github": ("github", "repository"), "gitlab": ("gitlab", "project")}  # the project's own
EVENT_MAX_CHARS = WebhookDelivery._meta.get_field("event").max_length
TOO_BIG = {"detail": "the body is larger than AITEAM_WEBHOOK_MAX_BYTES allows"}
UNAUTHORIZED = {"detail": "the signature is missing or does not match this project's webhook secret"}


@csrf_exempt  # a host signs its deliveries; there is no session to forge
@require_POST
def receive(request: HttpRequest, source: str, project_id) -> JsonResponse:
    host = SOURCES[source]  # the URL pattern admits only these
    if _too_big(request):  # by its Content-Length: not read at all
        return JsonResponse(TOO_BIG, status=413)
    body = request.body
    if len(body) > settings.AITEAM_WEBHOOK_MAX_BYTES:
        return JsonResponse(TOO_BIG, status=413)
    project = Project.objects.filter(pk=project_id).first()
    secret, why_not = webhook_secret(project, source)
    # a signature is checked even without a secret (against a random one), so a refusal takes as long either way
    if not host.verify(secret or secrets.token_hex(32), body, request.headers) or why_not:
        logger.warning("webhook %s for project %s refused: %s", source, project_id, why_not or "bad or no signature")
        return JsonResponse(UNAUTHORIZED, status=401)
    try:
        payload = _json(body)
        delivery_id = host.delivery_of(request.headers)
        reading = host.read(request.headers, payload, project.webhook_label)
    except PayloadError as exc:
        return JsonResponse({"detail": str(exc)}, status=400)
    if reading.ticket is None:
        return _answer(source, project, reading.event, f"ignored: {reading.ignored}")
    if len(reading.event) > EVENT_MAX_CHARS:  # GitLab's action is free text: no real one comes near
        return JsonResponse({"detail": f"the event it reports is longer than {EVENT_MAX_CHARS} characters"}, status=400)
    if elsewhere := _elsewhere(source, project, payload):
        return _answer(source, project, reading.event, f"ignored: {elsewhere}")
    delivery = Delivery(source, delivery_id, reading.event, hashlib.sha256(body).hexdigest())
    try:
        requirement, outcome = webhook_ticket_accept(project=project, delivery=delivery, ticket=reading.ticket)
    except DomainError as exc:
        return JsonResponse({"detail": str(exc)}, status=422)
    return _answer(source, project, reading.event, outcome, requirement.pk if requirement else None)


def _elsewhere(source: str, project: Project, payload: dict) -> str:
    """Why an issue of another repository starts nothing here (an organization's hook, or one secret shared by
    several repositories, reports them all): "" when it is the repository the project's settings name or, when they
    name none (push only), the one its repo_url's path names; a project with neither takes what its hook reports
    (docs/api.md). Jira has no repository: its site is the project's by configuration."""
    if source not in REPOSITORY_SETTING:
        return ""
    host, name = REPOSITORY_SETTING[source]
    ours = str(((project.settings or {}).get(host) or {}).get(name) or "") or repository_path(project.repo_url)
    theirs = SOURCES[source].repository_of(payload)
    if ours and ours.lower() not in {known.lower() for known in theirs}:
        return f"the issue is in {(theirs[0] if theirs else 'an unnamed repository')[:200]!r}, not in this project's {ours!r}"
    return ""


def _too_big(request: HttpRequest) -> bool:
    try:
        length = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        return True
    return length > settings.AITEAM_WEBHOOK_MAX_BYTES


def _json(body: bytes) -> dict:
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        raise PayloadError("the body is not JSON") from None
    if not isinstance(payload, dict):
        raise PayloadError("the body is not a JSON object")
    if problem := json_problem(payload, settings.AITEAM_JSON_MAX_DEPTH):
        raise PayloadError(problem)
    return payload


def _answer(source: str, project: Project, event: str, outcome: str, requirement_id=None) -> JsonResponse:
    # an ignored event's name is the sender's (a Jira body, a header) and was never checked against EVENT_MAX_CHARS
    logger.info("webhook %s for project %s: %s → %s", source, project.pk, echoed(event, EVENT_MAX_CHARS), outcome)
    return JsonResponse({"detail": outcome, "requirement": str(requirement_id) if requirement_id else None}, status=202)

