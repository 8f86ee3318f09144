"""Pages of the list endpoints: ?limit=&offset=, 50 rows by default."""
import re

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination


class Pages(LimitOffsetPagination):
    """A larger ?limit is cut to max_limit rows: a page stays bounded, and a number too large for the database's
    LIMIT (20 digits) never reaches it. A ?limit or ?offset that is not a whole number in range is a 400, as the
    schema says, not silently the first page."""

    max_limit = 200

    def get_limit(self, request):
        return min(self.number(request, self.limit_query_param, self.default_limit, 1), self.max_limit)

    def get_offset(self, request):
        return self.number(request, self.offset_query_param, 0, 0)

    @staticmethod
    def number(request, name: str, default: int, lowest: int) -> int:
        raw = request.query_params.get(name)
        if raw is None:
            return default
        if not re.fullmatch(r"-?[0-9]{1,30}", raw):
            raise ValidationError({name: ["a whole number is required"]})
        value = int(raw)
        if value < lowest:
            raise ValidationError({name: [f"must be at least {lowest}"]})
        return value

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"]["minimum"] = 1 if parameter["name"] == self.limit_query_param else 0
        return parameters
