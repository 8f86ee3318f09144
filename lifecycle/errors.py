"""Domain errors. The API maps them once (lifecycle/api/errors.py); the admin shows their text."""


class DomainError(Exception):
    """The request is wrong in domain terms (HTTP 400). `field` names the input at fault."""

    status = 400

    def __init__(self, message: str, field: str = "non_field_errors") -> None:
        super().__init__(message)
        self.field = field


class KeyReused(DomainError):
    """An idempotency key came again with a different request (HTTP 422, as the IETF Idempotency-Key draft asks)."""

    status = 422


class IllegalTransition(Exception):
    """The object is not in a state that allows this (HTTP 409)."""


class NotPermitted(Exception):
    """The user may see the object but not do this to it (HTTP 403)."""


class StaleStep(Exception):
    """A worker wrote with a fence or state that is no longer current; its write is refused."""


class SandboxTimedOut(Exception):
    """The sandbox killed a test run at its wall-clock limit: infrastructure, the step is retried (bounded)."""
