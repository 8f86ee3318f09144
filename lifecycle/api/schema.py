"""The OpenAPI schema names the errors every operation can answer, with their body (`ErrorOut`): 400 (bad input,
NUL bytes included), 401, 403 on writes (roles, CSRF for a session), 404 on an object's path, 413 and 415 where a
body is read (larger than DATA_UPLOAD_MAX_MEMORY_SIZE; a content type the operation does not parse), 429 where
throttled. Operation-specific ones (409, 422) are declared on the view."""
from drf_spectacular.openapi import AutoSchema

from lifecycle.api.serializers import ErrorOut

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds until a request may succeed"}}


class ApiSchema(AutoSchema):
    def get_operation(self, *args, **kwargs):
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        body = {"application/json": {"schema": self.resolve_serializer(ErrorOut, "response").ref}}
        for code, description in self.common_errors(has_body="requestBody" in operation).items():
            operation["responses"].setdefault(str(code), {"description": description, "content": body})
        if "429" in operation["responses"]:
            operation["responses"]["429"].setdefault("headers", RETRY_AFTER)
        return operation

    def common_errors(self, *, has_body: bool) -> dict[int, str]:
        """Status → description; an operation's own declaration of a status wins."""
        errors = {400: "invalid input: the fields named with their messages, or `detail`", 401: "not authenticated"}
        if self.method not in SAFE_METHODS:
            errors[403] = "the user's role does not allow it"
        if "{" in self.path:
            errors[404] = "no such object, or another organization's"
        if has_body:
            errors[413] = "the body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE allows (refused unread)"
            errors[415] = "a body in a content type this operation does not take (the request body's types)"
        if self.view.get_throttles():
            errors[429] = "too many requests: wait the `Retry-After` seconds"
        return errors
