class ChannelError(Exception):
    """A channel did not send; the message says why without any secret (a webhook URL is one). `retry_after_s`: how
    long the other side asked us to wait (a 429's Retry-After), which the next attempt respects."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ChannelRefused(ChannelError):
    """A channel will never send this as configured (a refused webhook address, a redirect): no retry."""
