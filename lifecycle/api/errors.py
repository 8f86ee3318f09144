"""One place that turns domain errors into HTTP: 400 (422 for a reused idempotency key) with field errors, 403,
404, 409; and a 401 past the address's anonymous rate limit into 429."""
from django.core.exceptions import ObjectDoesNotExist
from rest_framework import status
from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated, NotFound, PermissionDenied
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from lifecycle.api.throttles import throttle_unauthenticated
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted


def exception_handler(exc, context):
    if isinstance(exc, DomainError):
        return Response({exc.field: [str(exc)]}, status=exc.status)
    if isinstance(exc, IllegalTransition):
        return Response({"detail": str(exc), "code": "illegal_transition"}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, NotPermitted):
        exc = PermissionDenied(str(exc))
    elif isinstance(exc, ObjectDoesNotExist):
        exc = NotFound()
    elif isinstance(exc, NotAuthenticated | AuthenticationFailed):
        exc = throttle_unauthenticated(context["request"], context["view"]) or exc
    return drf_handler(exc, context)
