"""Refuse a request carrying a NUL byte in its path, a header, a query parameter or a form field with 400.

PostgreSQL text cannot hold NUL, so such a value reaching a lookup (a token, a session key, a login name) is a
DataError, a 500. JSON bodies are checked by their parser (`lifecycle.api.parsers`), after `\\u0000` is decoded."""
from __future__ import annotations

from collections.abc import Callable, Iterable

from django.http import HttpRequest, HttpResponse, JsonResponse

NUL = "\x00"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
REFUSAL = {"detail": "NUL bytes are not allowed in the path, headers, query parameters or form fields",
           "code": "nul_byte"}


def has_nul(values: Iterable[str]) -> bool:
    return any(NUL in value for value in values)


def request_has_nul(request: HttpRequest) -> bool:
    headers = [str(v) for k, v in request.META.items() if k.startswith("HTTP_") or k in ("CONTENT_TYPE", "QUERY_STRING")]
    query = [*request.GET.keys(), *(v for _, vs in request.GET.lists() for v in vs)]
    if has_nul([request.path, *headers, *query]):
        return True
    if request.method == "POST" and request.content_type in FORM_TYPES:
        return has_nul([*request.POST.keys(), *(v for _, vs in request.POST.lists() for v in vs)])
    return False


class RefuseNulBytes:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request_has_nul(request):
            return JsonResponse(REFUSAL, status=400)
        return self.get_response(request)
