class ChannelError(Exception):
    """A channel did not deliver; the message says why without any secret (a webhook URL is one)."""
