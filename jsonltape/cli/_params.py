"""Option types the commands share: a finite number of seconds, a JSON object."""

from __future__ import annotations

import math
from typing import Any

import click
import msgspec

from .._limits import MAX_INT

__all__ = ["COUNT", "SECONDS", "SEQ", "JsonObject", "Seconds", "parse_json"]

_json = msgspec.json.Decoder()


# ParamType is generic in new click only; subscripting it would break click 8.1 at run time.
class Seconds(click.ParamType):  # type: ignore[type-arg]
    """A finite, non-negative number of seconds (at least ``minimum``).

    click's ``FloatRange`` lets ``nan`` through (every comparison with it is false) and ``inf``
    with it, and a lock wait or a poll interval of either would hang or spin.
    """

    name = "seconds"

    def __init__(self, minimum: float = 0.0) -> None:
        self.minimum = minimum

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            seconds = value
        else:
            try:
                seconds = float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds < self.minimum:
            self.fail(
                f"{value!r} is not a finite number of seconds >= {self.minimum:g}", param, ctx
            )
        return seconds


#: Seconds from 0 on (``--wait``, ``--settle``).
SECONDS = Seconds()

#: A seq (or a count): 0 to the format's largest integer (spec §6). A seq past the end of a
#: session is the library's to refuse.
SEQ = click.IntRange(0, MAX_INT)
#: How many (``--limit``, ``--last``): at least one.
COUNT = click.IntRange(1, MAX_INT)


def parse_json(text: str, what: str) -> Any:
    """Decode a JSON option value; a bad one is a one-line usage error naming ``what``."""
    try:
        return _json.decode(text)
    except msgspec.DecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint=what) from None
    except RecursionError:
        from .._scan import TOO_DEEP  # not above: the read machinery, for the deepest input only

        raise click.BadParameter(TOO_DEEP, param_hint=what) from None


class JsonObject(click.ParamType):  # type: ignore[type-arg]
    """A JSON object given on the command line (``--data``, ``--meta``); ``null``, a list or a
    number is refused rather than silently stored as something else."""

    name = "json-object"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        what = f"'{param.opts[0]}'" if param is not None and param.opts else "value"
        obj = parse_json(str(value), what)
        if not isinstance(obj, dict):
            self.fail(f"must be a JSON object {{...}}, not {_kind(obj)}", param, ctx)
        return obj


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "an array"
    return "a string" if isinstance(value, str) else "a number"
