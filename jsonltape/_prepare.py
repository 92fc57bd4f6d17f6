"""One event request through the append pipeline: envelope, lossless gate, shape, frame.

:func:`prepare_event` is the only way an appended event becomes bytes, whatever API made it
(``append``, ``append_batch``, the agent helpers). Each rule lives in one place:

- **envelope** (here, with the surface member's rule in :func:`jsonltape._surface.check_op`):
  the type (a namespaced name, not one the writer writes itself, unknown only when ignorable),
  ``data`` an object, ``surface``, ``ignorable``, ``sources``, ``key`` and ``time``. The member
  types and ranges are the :class:`~jsonltape.events.Event` Struct's own: the writer encodes an
  Event and decodes its line back with the readers' decoder, so a member out of range fails
  exactly where a reader would fail it, and that decode is the one the gate needs anyway;
- **lossless gate** (:mod:`jsonltape._gate`): ``data`` reads back unchanged;
- **shape** (:mod:`jsonltape._validate`): a core type's data has its Struct's shape;
- **frame** (:mod:`jsonltape._framing`): the CRC suffix.

The surface fold (:class:`jsonltape._surface.SurfaceFold`) needs the writer's state and runs
there, after this.

Every rule has a fast form that accepts and a precise form that names what is wrong. When a
fast form fails, the precise forms run in the order below and the first broken rule is raised,
so which error a request gets never depends on which shortcut noticed it:

    key, type name, writer-only type, data an object, surface, ignorable, sources, unknown
    type not ignorable, time, lossless, shape
"""

from __future__ import annotations

import time as _time
from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple, NoReturn

import msgspec

from . import _framing
from ._gate import check_lossless, encode_error, encoder, suspect
from ._surface import check_op
from ._validate import validate_fast
from .errors import InvalidEventError, SurfaceError
from .events import (
    CORE_TYPES,
    IGNORABLE_TYPES,
    MAX_TIME,
    SURFACE_TYPES,
    Event,
    validate_type_name,
)

__all__ = [
    "REQUEST_MEMBERS",
    "check_ignorable",
    "check_key",
    "check_sources",
    "check_time",
    "encode_event",
    "now_ms",
    "prepare_event",
    "rule_of",
    "spec_of",
]

_decoder = msgspec.json.Decoder(Event)
#: The members an event request may name: the envelope's own, less what the writer assigns.
REQUEST_MEMBERS = frozenset(Event.__struct_fields__) - {"seq", "crc"}
#: Types only jsonltape itself writes: the header, checkpoints, and the branches a merge
#: records (spec §8.7.14), whose lines name other versions by their crcs.
_WRITER_ONLY = frozenset({"session/start", "session/flush", "branch/start", "branch/event"})
#: The longest key (spec §6), in characters.
MAX_KEY = 1024


def now_ms() -> int:
    return _time.time_ns() // 1_000_000


class Rule(NamedTuple):
    """What the envelope rules say about one event type, once its name was checked."""

    #: The surface an event of this type gets when none is given.
    surface: Literal["append"] | None
    #: The ``ignorable`` flag it gets when none is given.
    ignorable: bool
    #: A core type (an unknown one must be ignorable).
    known: bool
    #: ``surface/retract``: the surface member is required.
    retract: bool


#: Types whose name and rules were checked (a regex per append adds up). Bounded: a writer fed
#: endless distinct extension types checks each one every time instead of growing forever.
_RULES: dict[str, Rule] = {}
_MAX_RULES = 4096


def rule_of(type_: Any) -> Rule:
    """The envelope rules of ``type_``; refuses a bad name or a type only the writer writes."""
    rule = _RULES.get(type_) if type(type_) is str else None  # a list is unhashable
    if rule is not None:
        return rule
    validate_type_name(type_)
    if type_ in _WRITER_ONLY:
        raise InvalidEventError(f"{type_} events are written by the writer itself", field="$.type")
    rule = Rule(
        "append" if type_ in SURFACE_TYPES else None,
        type_ in IGNORABLE_TYPES,
        type_ in CORE_TYPES,
        type_ == "surface/retract",
    )
    if type(type_) is str and len(_RULES) < _MAX_RULES:
        _RULES[type_] = rule
    return rule


def spec_of(item: Mapping[str, Any]) -> dict[str, Any]:
    """A batch item's members (absent ones None); refuses members the envelope does not have."""
    if not isinstance(item, Mapping):
        raise InvalidEventError("an event must be a JSON object with a 'type'")
    unknown = set(item) - REQUEST_MEMBERS
    if unknown:
        raise InvalidEventError(
            f"unknown envelope member(s) {sorted(unknown)}; allowed: {sorted(REQUEST_MEMBERS)}"
        )
    if "type" not in item:
        raise InvalidEventError("event has no 'type'", field="$.type")
    return {k: item.get(k) for k in REQUEST_MEMBERS}


def check_key(key: Any) -> str:
    """A key: a non-empty string of at most 1024 characters, valid UTF-8 (spec §6)."""
    if type(key) is not str or not 0 < len(key) <= MAX_KEY:
        raise InvalidEventError(
            f"key must be a non-empty string of at most {MAX_KEY} characters", field="$.key"
        )
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidEventError(
            "key contains a lone surrogate and is not valid UTF-8", field="$.key"
        ) from None
    return key


def _data_object(data: Any) -> dict[str, Any]:
    if data is None:
        return {}
    if isinstance(data, dict):
        return data
    if isinstance(data, Mapping):
        return dict(data)
    raise InvalidEventError(
        f"data must be a JSON object, not {type(data).__name__}", field="$.data"
    )


def check_ignorable(type_: str, value: Any) -> bool:
    """A given ``ignorable`` flag: a bool the type allows."""
    if type(value) is not bool:
        raise InvalidEventError("ignorable must be true or false", field="$.ignorable")
    if not value and type_ in IGNORABLE_TYPES:
        raise InvalidEventError(f"{type_} is always ignorable", field="$.ignorable")
    if value and type_ in SURFACE_TYPES:
        raise InvalidEventError(
            f"{type_} is model-visible and cannot be ignorable", field="$.ignorable"
        )
    return value


def _unknown_type(type_: str) -> InvalidEventError:
    # Spec §8.7.1: a writer refuses what would make the file fail to fold, and a fold refuses
    # an unknown type that readers may not skip.
    return InvalidEventError(
        f"unknown event type {type_!r}: readers could not fold past it; if readers may "
        'skip it, mark it ignorable ("ignorable": true in the event, --ignorable on the '
        "command line, ignorable=True in Python)",
        field="$.type",
    )


def _sources_list(value: Any) -> list[Any]:
    if type(value) is list:
        return value
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise SurfaceError(
            f"sources must be a list of earlier seqs, not {type(value).__name__}",
            field="$.sources",
        )
    return list(value)


def check_sources(value: list[Any], seq: int) -> None:
    """``sources``: distinct seqs of earlier events (spec §6)."""
    seen: set[int] = set()
    for i, s in enumerate(value):
        if type(s) is not int or not 0 <= s < seq:
            raise SurfaceError(
                f"sources must reference earlier events (0..{seq - 1}), got {s!r}",
                field=f"$.sources[{i}]",
            )
        if s in seen:
            raise SurfaceError(f"seq {s} appears twice in sources", field=f"$.sources[{i}]")
        seen.add(s)


def check_time(value: Any, now: int | None = None) -> int:
    """An event's time: epoch ms from 0 to 9999-12-31 (spec §6); None means ``now``."""
    if value is None and now is not None:
        return now
    if type(value) is not int or not 0 <= value <= MAX_TIME:
        raise InvalidEventError(
            "time must be epoch milliseconds, an integer from 0 to "
            f"{MAX_TIME} (9999-12-31), got {value!r}",
            field="$.time",
        )
    return value


def _encode(event: Event) -> tuple[bytes, bytes, Event] | None:
    """(body, framed line, the line decoded as a reader decodes it), or None when msgspec
    cannot encode the event or its own decoder refuses the line (a member out of range)."""
    try:
        body = encoder.encode(event)
    except (TypeError, ValueError, OverflowError, RecursionError, UnicodeEncodeError):
        return None
    line = _framing.frame(body)
    try:
        return body, line, _decoder.decode(line)
    except (msgspec.ValidationError, RecursionError):  # RecursionError: nested too deep
        return None


def encode_event(
    seq: int,
    type_: str,
    time: int,
    data: dict[str, Any],
    surface: Any,
    sources: list[int] | None,
    key: str | None,
    ignorable: bool,
) -> tuple[bytes, Event]:
    """Encode, gate and frame an event whose envelope is already known good (the header, a
    crashed turn's closers, an imported event): the line and the event as a reader sees it."""
    found = _encode(Event(seq, type_, time, data, surface, sources, key, ignorable))
    if found is None:
        raise encode_error(data, "$.data", 1)
    body, line, event = found
    if event.data != data or suspect(body):  # the gate's fast path, inlined: it runs per append
        check_lossless(data, body, event.data, "$.data", 1)
    return line, event


def prepare_event(
    type_: Any,
    data: Any,
    surface: Any,
    sources: Any,
    key: Any,
    ignorable: Any,
    seq: int,
    time: Any,
) -> tuple[bytes, Event]:
    """Check one event request and encode it as line ``seq``: (line bytes, event).

    ``None`` means a member's default (``time`` is then required: the caller passes now).
    Raises :class:`InvalidEventError` (or a subclass) naming the first broken rule.
    """
    if key is not None:
        check_key(key)
    rule = _RULES.get(type_) if type(type_) is str else None
    if rule is None:
        rule = rule_of(type_)
    if type(data) is not dict:
        data = _data_object(data)
    if surface is None and not rule.retract:
        surface = rule.surface
    elif rule.retract or type(surface) is not str or surface != rule.surface:
        surface = check_op(type_, surface, seq)
    if ignorable is None:
        ignorable = rule.ignorable
    elif ignorable is not rule.ignorable:
        ignorable = check_ignorable(type_, ignorable)
    if sources is not None and type(sources) is not list:
        sources = _sources_list(sources)
    found = _encode(Event(seq, type_, time, data, surface, sources, key, ignorable))
    if found is None:
        _refuse(type_, data, sources, ignorable or rule.known, seq, time)
    body, line, event = found
    if sources is not None:
        # Decoded, so every item is an integer in range: left is that they are earlier, once.
        got = event.sources
        if got and (max(got) >= seq or len(set(got)) != len(got)):
            check_sources(got, seq)
    if not ignorable and not rule.known:
        raise _unknown_type(type_)
    if event.data != data or suspect(body):
        check_lossless(data, body, event.data, "$.data", 1)
    validate_fast(type_, event.data, data)
    return line, event


def _refuse(
    type_: str, data: dict[str, Any], sources: list[Any] | None, foldable: bool, seq: int, time: Any
) -> NoReturn:
    """The precise forms of the rules after the encode, in order, for a request the encode or
    its decode refused: raise the first one it breaks."""
    if sources is not None:
        check_sources(sources, seq)
    if not foldable:
        raise _unknown_type(type_)
    check_time(time)
    raise encode_error(data, "$.data", 1)
