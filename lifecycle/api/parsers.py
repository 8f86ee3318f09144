"""JSON bodies within bounds: nested at most AITEAM_JSON_MAX_DEPTH deep, no NUL in any string. Beyond either
the answer is 400, not a RecursionError or a DataError deeper in (both were 500s)."""
from __future__ import annotations

from django.conf import settings
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
            continue
        if isinstance(value, dict | list):
            if depth > max_depth:
                return f"JSON nested deeper than {max_depth} levels"
            items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            pending.extend((item, depth + 1) for item in items)
    return None


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
