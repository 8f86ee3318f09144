"""JSON bodies within bounds: nested at most AITEAM_JSON_MAX_DEPTH deep, no NUL and no unpaired surrogate in any
string or key. Beyond any of these the answer is 400, not a RecursionError, a DataError or a UnicodeEncodeError
deeper in (all were 500s).

An unpaired surrogate ("\\ud800" without its low half) is valid JSON text but no UTF-8 can hold it: neither the
database (SQLite and PostgreSQL both refuse to encode it) nor DRF's JSON renderer, which answered a 400 that repeats
the value with a 500. The API, the ticket webhooks, Slack and the admin's JSON boxes (project settings and a budget
override through BoundedJSONFormField, a promotion's modification) all call json_problem, and no
other input can carry one: a path, a query string, a form field or a multipart part is decoded from bytes (invalid
UTF-8 becomes U+FFFD), a header is Latin-1. The refusal names the problem, never the value."""
from __future__ import annotations

from django import forms
from django.conf import settings
from django.forms.fields import InvalidJSONInput
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


def json_problem(data: object, max_depth: int) -> str | None:
    """Why the decoded body is refused, or None. Iterative, so the check itself cannot overflow the stack."""
    pending = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return "NUL bytes are not allowed in JSON strings"
            if has_lone_surrogate(value):
                return "unpaired surrogates (\\ud800 to \\udfff without their pair) are not allowed in JSON strings"
            continue
        if isinstance(value, dict | list):
            if depth > max_depth:
                return f"JSON nested deeper than {max_depth} levels"
            items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            pending.extend((item, depth + 1) for item in items)
    return None


def has_lone_surrogate(text: str) -> bool:
    """Whether `text` holds a surrogate code point, which only an unpaired \\uXXXX escape can put in a decoded string
    (json joins a well-formed pair into one character)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.AITEAM_JSON_MAX_DEPTH
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:  # the decoder's own stack ran out: deeper than any limit allowed here
            raise ParseError(f"JSON parse error - nested deeper than {limit} levels") from None
        problem = json_problem(data, limit)
        if problem:
            raise ParseError(f"JSON parse error - {problem}")
        return data


class BoundedJSONFormField(forms.JSONField):
    """An admin form's JSON box under the same bounds: a problem (a NUL, a lone surrogate, too deep, an integer too
    long for json) is a form error, and the box shows the text as typed again (Django's JSONField shows the decoded
    value, and a page holding a surrogate cannot be encoded)."""

    def to_python(self, value):
        try:
            converted = super().to_python(value)
        except RecursionError:
            raise forms.ValidationError(f"JSON nested deeper than {settings.AITEAM_JSON_MAX_DEPTH} levels") from None
        except ValueError as exc:  # json's refusal of an integer of 4,300 digits or more, which Django lets through
            raise forms.ValidationError(f"Enter a valid JSON: {exc}") from None
        if problem := json_problem(converted, settings.AITEAM_JSON_MAX_DEPTH):
            raise forms.ValidationError(problem)
        return converted

    def bound_data(self, data, initial):
        try:
            value = super().bound_data(data, initial)
        except (RecursionError, ValueError):
            return InvalidJSONInput(data)
        if isinstance(value, InvalidJSONInput) or json_problem(value, settings.AITEAM_JSON_MAX_DEPTH) is None:
            return value
        return InvalidJSONInput(data)
