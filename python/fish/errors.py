"""The one exception fish raises for what libfish refused or failed."""


class FishError(RuntimeError):
    """A libfish call failed; the message is libfish's (it names the file or the argument)."""
