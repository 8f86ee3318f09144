"""One place that turns errors into HTTP: domain errors into 400 (422 for a reused idempotency key) with field
errors, 403, 404, 409; a 401 past the address's anonymous rate limit into 429; and under /api/, Django's own 400,
403, 404 and 500 (and a body too large, 413) into JSON, and its trailing-slash redirect of a write into a JSON 404."""
from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.middleware import common
from django.views import defaults
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
        return Response({"detail": str(exc), "code": exc.code}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, NotPermitted):
        exc = PermissionDenied(str(exc))
    elif isinstance(exc, ObjectDoesNotExist):
        exc = NotFound()
    elif isinstance(exc, NotAuthenticated | AuthenticationFailed):
        exc = throttle_unauthenticated(context["request"], context["view"]) or exc
    return drf_handler(exc, context)


# --- Django's own error answers (no DRF view ran, or it never got the request): JSON under /api/, as docs/api.md
# promises; the admin's and the dashboard's pages keep Django's HTML. Wired as handler400/403/404/500 (aiteam/urls.py).

API_PREFIX = "/api/"
UNREADABLE = {TooManyFieldsSent: "the form has more fields than DATA_UPLOAD_MAX_NUMBER_FIELDS allows",
              TooManyFilesSent: "the form has more files than DATA_UPLOAD_MAX_NUMBER_FILES allows",
              MultiPartParserError: "the multipart body cannot be read (its boundary is missing or wrong)"}


def _api(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A body Django refused to read: over DATA_UPLOAD_MAX_MEMORY_SIZE is 413 (refused by its Content-Length,
    unread, as the webhooks answer a body over theirs), an unreadable form 400."""
    if not _api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        return JsonResponse({"detail": f"the body is larger than the {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes "
                                       "DATA_UPLOAD_MAX_MEMORY_SIZE allows", "code": "too_large"}, status=413)
    why = next((text for kind, text in UNREADABLE.items() if isinstance(exception, kind)), "the request cannot be read")
    return JsonResponse({"detail": why}, status=400)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if not _api(request):
        return defaults.permission_denied(request, exception)
    return JsonResponse({"detail": str(PermissionDenied.default_detail)}, status=403)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A path the API does not have (a mistyped resource, an id no route takes)."""
    if not _api(request):
        return defaults.page_not_found(request, exception)
    return JsonResponse({"detail": str(NotFound.default_detail)}, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if not _api(request):
        return defaults.server_error(request)
    return JsonResponse({"detail": "A server error occurred."}, status=500)


class CommonMiddleware(common.CommonMiddleware):
    """Django's, but under /api/ and /webhooks/ a write to a path that lacks its trailing slash is a JSON 404 naming
    the path with it, where Django redirects (or, with DEBUG, raises): a client follows a 301 or 302 with a GET and
    loses the body, and a tracker's webhook delivery does not follow it at all. A GET is still redirected: it loses
    nothing."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if (response.status_code == 404 and request.path_info.startswith(SLASHED) and request.method in WRITES
                and self.should_redirect_with_slash(request)):
            return JsonResponse({"detail": f"Not found. These paths end with a slash: {request.method} "
                                           f"{request.path}/", "code": "no_trailing_slash"}, status=404)
        return super().process_response(request, response)


SLASHED = (API_PREFIX, "/webhooks/")  # read by programs, which a redirect of a write fails


WRITES = ("DELETE", "PATCH", "POST", "PUT")  # the methods whose data Django says a redirect cannot keep
