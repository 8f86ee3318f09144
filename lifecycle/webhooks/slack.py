"""POST /webhooks/slack/events/ (the Events API) and /webhooks/slack/interactive/ (button presses): the signature
over the raw body, its age, then one service call (lifecycle/services/slack.py).

Slack signs each request with the app's signing secret: X-Slack-Signature = "v0=" + hex HMAC-SHA256 of
"v0:{X-Slack-Request-Timestamp}:{raw body}". A request without a good signature, or signed more than
AITEAM_SLACK_MAX_AGE_S ago (a replay), is a 401. Everything Slack sends that we do not act on is answered 200 with
why (Slack retries anything else, and turns off an app whose events keep failing), and logged.
https://api.slack.com/authentication/verifying-requests-from-slack
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from lifecycle.api.parsers import json_problem
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted, echoed
from lifecycle.models import ActionApproval, ReviewTask, SlackWorkspace
from lifecycle.services.slack import slack_action_take, slack_message_take

logger = logging.getLogger(__name__)
UNAUTHORIZED = {"detail": "the Slack signature is missing, does not match, or is too old"}
MESSAGE_EVENTS = ("message", "app_mention")


def signature_problem(secret: str, body: bytes, headers: Mapping[str, str], now: float | None = None) -> str:
    """Why the request is not Slack's, or "" when it is: signed with `secret`, not longer ago than allowed."""
    stamp, signature = headers.get("X-Slack-Request-Timestamp", ""), headers.get("X-Slack-Signature", "")
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 12) or not signature.startswith("v0="):
        return "no timestamp or signature"
    if abs((time.time() if now is None else now) - int(stamp)) > settings.AITEAM_SLACK_MAX_AGE_S:
        return "signed too long ago"
    # checked even without a secret (against a random one), so a refusal takes as long either way
    key = (secret or os.urandom(32).hex()).encode()
    expected = "v0=" + hmac.new(key, b"v0:" + stamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.strip().lower().encode()) or not secret:
        return "the signature does not match" if secret else f"{settings.AITEAM_SLACK_SIGNING_SECRET_ENV} is not set"
    return ""


@csrf_exempt  # Slack signs its requests; there is no session to forge
@require_POST
def events(request: HttpRequest) -> JsonResponse:
    payload = _verified(request)
    if isinstance(payload, JsonResponse):
        return payload
    if payload.get("type") == "url_verification":
        return JsonResponse({"challenge": str(payload.get("challenge") or "")})
    event = payload.get("event") if isinstance(payload.get("event"), dict) else {}
    workspace = SlackWorkspace.objects.select_related("organization").filter(team_id=str(payload.get("team_id"))).first()
    if workspace is None:
        return _answer(request, f"ignored: workspace {echoed(repr(payload.get('team_id')))} belongs to no organization")
    if payload.get("type") != "event_callback" or event.get("type") not in MESSAGE_EVENTS:
        return _answer(request, f"ignored: a {echoed(event.get('type') or payload.get('type'))} event does nothing")
    return _answer(request, slack_message_take(workspace=workspace, event=event,
                                               event_id=str(payload.get("event_id") or "")))


@csrf_exempt
@require_POST
def interactive(request: HttpRequest) -> JsonResponse:
    payload = _verified(request, form=True)
    if isinstance(payload, JsonResponse):
        return payload
    team, user = _field(payload, "team", "id"), _field(payload, "user", "id")
    actions = payload.get("actions") if isinstance(payload.get("actions"), list) else []
    workspace = SlackWorkspace.objects.select_related("organization").filter(team_id=team).first()
    if workspace is None or payload.get("type") != "block_actions" or not actions:
        return _answer(request, "ignored: not a button press in a workspace of an organization")
    value = str(actions[0].get("value") or "") if isinstance(actions[0], dict) else ""
    try:
        return _answer(request, slack_action_take(workspace=workspace, slack_user_id=user, value=value))
    except NotPermitted as exc:
        return _answer(request, f"refused: {exc}", status=403)
    except (ActionApproval.DoesNotExist, ReviewTask.DoesNotExist) as exc:
        return _answer(request, f"refused: {exc}", status=404)
    except IllegalTransition as exc:  # pressed twice, or decided elsewhere first: nothing more is done
        return _answer(request, f"refused: {exc}", status=409)
    except DomainError as exc:
        return _answer(request, f"refused: {exc}", status=400)


def _verified(request: HttpRequest, *, form: bool = False) -> dict[str, Any] | JsonResponse:
    """The request's payload once its signature holds (the JSON body, or the form's `payload` field); else the
    response to send."""
    body = request.body
    if len(body) > settings.AITEAM_WEBHOOK_MAX_BYTES:
        return JsonResponse({"detail": "the body is larger than AITEAM_WEBHOOK_MAX_BYTES allows"}, status=413)
    if problem := signature_problem(os.environ.get(settings.AITEAM_SLACK_SIGNING_SECRET_ENV, ""), body,
                                    request.headers):
        logger.warning("slack %s refused: %s", request.path, problem)
        return JsonResponse(UNAUTHORIZED, status=401)
    try:
        text = (parse_qs(body.decode()).get("payload") or [""])[0] if form else body.decode()
        payload = json.loads(text)
    except (ValueError, RecursionError):
        return JsonResponse({"detail": "the payload is not JSON"}, status=400)
    if not isinstance(payload, dict) or (problem := json_problem(payload, settings.AITEAM_JSON_MAX_DEPTH)):
        return JsonResponse({"detail": problem if isinstance(payload, dict) else "not a JSON object"}, status=400)
    return payload


def _field(payload: dict[str, Any], name: str, key: str) -> str:
    value = payload.get(name)
    return str(value.get(key) or "") if isinstance(value, dict) else ""


def _answer(request: HttpRequest, outcome: str, status: int = 200) -> JsonResponse:
    retry = request.headers.get("X-Slack-Retry-Num")
    logger.info("slack %s%s: %s", request.path, f" (retry {retry})" if retry else "", outcome)
    return JsonResponse({"detail": outcome}, status=status)
