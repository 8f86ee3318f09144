class ChannelError(Exception):
    """A channel did not send; the message says why without any secret (a webhook URL is one)."""


class ChannelRefused(ChannelError):
    """A channel will never send this as configured (a refused webhook address, a redirect): no retry."""
