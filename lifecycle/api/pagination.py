"""Pages of the list endpoints: ?limit=&offset=, 50 rows by default."""
from rest_framework.pagination import LimitOffsetPagination


class Pages(LimitOffsetPagination):
    """A larger ?limit is cut to max_limit rows: a page stays bounded, and a number too large for the database's
    LIMIT (20 digits) never reaches it."""

    max_limit = 200
