"""The format's integer bounds (spec §6), and numbers read from text, in a module that
imports nothing.

:mod:`jsonltape.events` re-exports both; code that needs only a bound (the CLI's option types,
time rendering) imports it from here and so does not load the event Structs at start-up.
"""

__all__ = ["MAX_INT", "MAX_TIME", "ascii_int"]

#: The largest integer every JSON parser holds exactly (JavaScript's safe integers).
MAX_INT = 2**53 - 1
#: 9999-12-31T23:59:59.999Z in epoch ms: the range of ``time`` and ``created`` (spec §6).
MAX_TIME = 253_402_300_799_999


def ascii_int(text: object, digits: int = 16) -> int | None:
    """``text`` as a number when it is 1 to ``digits`` ASCII digits, else None: where a number
    is read from text a file or a request chose (``str.isdigit`` also takes ``²``, which ``int``
    refuses, as it does more than 4,300 digits)."""
    if isinstance(text, str) and 0 < len(text) <= digits and text.isascii() and text.isdigit():
        return int(text)
    return None
