"""Turn an event request into bytes: validate the envelope, gate the data, encode once, frame.

Also the few low-level write helpers the writer shares with creation and repair.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from . import _framing, _fs
from ._gate import check_lossless, encode_error, encoder, suspect
from ._validate import validate_fast
from .errors import InvalidEventError, JsonltapeError, SessionExistsError, SurfaceError
from .events import (
    CORE_TYPES,
    IGNORABLE_TYPES,
    MAX_TIME,
    SURFACE_TYPES,
    Event,
    Replace,
    Retract,
    _Out,
    validate_type_name,
)

_WRITER_ONLY = frozenset({"session/start", "session/flush"})
_GOOD_TYPES: set[str] = set()  # type names already validated (a regex per append adds up)

__all__ = [
    "check_sources",
    "check_surface",
    "check_time",
    "encode_event",
    "load_keys",
    "now_ms",
    "prepare_event",
    "prepare_plain",
    "publish",
    "read_line",
    "spec_of",
    "write_all",
]

_decoder = msgspec.json.Decoder(Event)
ENVELOPE_KEYS = frozenset({"type", "data", "surface", "sources", "key", "ignorable", "time"})


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def message_id() -> str:
    return os.urandom(8).hex()


def parts_of(content: object) -> list[dict[str, Any]]:
    """A message's parts from text or a list of parts; anything else is refused."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if not isinstance(content, (list, tuple)):
        raise InvalidEventError(
            f"content must be text or a list of content parts, not {type(content).__name__}",
            field="$.data.message.parts",
        )
    return list(content)


def spec_of(item: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        raise InvalidEventError("an event must be a JSON object with a 'type'")
    unknown = set(item) - ENVELOPE_KEYS
    if unknown:
        raise InvalidEventError(
            f"unknown envelope member(s) {sorted(unknown)}; allowed: {sorted(ENVELOPE_KEYS)}"
        )
    if "type" not in item:
        raise InvalidEventError("event has no 'type'", field="$.type")
    return {k: item.get(k) for k in ENVELOPE_KEYS}


def check_time(value: Any, now: int) -> int:
    """An event's time: now, or a given epoch-ms integer (an import keeps the source's time)."""
    if value is None:
        return now
    if type(value) is not int or not 0 <= value <= MAX_TIME:
        raise InvalidEventError(
            "time must be epoch milliseconds, an integer from 0 to "
            f"{MAX_TIME} (9999-12-31), got {value!r}",
            field="$.time",
        )
    return value


def check_surface(type_: str, value: Any, seq: int) -> Any:
    if type_ == "surface/retract":
        if value is None:
            raise InvalidEventError(
                "surface/retract needs surface {op: retract, start, end}", field="$.surface"
            )
    elif type_ not in SURFACE_TYPES:
        if value is not None:
            raise InvalidEventError(
                f"{type_} is not model-visible and takes no surface", field="$.surface"
            )
        return None
    if value is None or value == "append":
        if type_ == "surface/retract":  # pragma: no cover - handled above
            raise InvalidEventError("retract needs a range", field="$.surface")
        return "append"
    if isinstance(value, (Replace, Retract)):
        op = value
    else:
        try:
            op = msgspec.convert(value, type=Replace | Retract)
        except msgspec.ValidationError as exc:
            raise InvalidEventError(
                f'surface must be "append", {{op: replace, start, end}} or '
                f"{{op: retract, start, end}}: {exc}",
                field="$.surface",
            ) from None
    if isinstance(op, Retract) != (type_ == "surface/retract"):
        raise InvalidEventError(
            "only surface/retract events retract; message events append or replace",
            field="$.surface.op",
        )
    for name in ("start", "end"):
        v = getattr(op, name)
        if type(v) is not int or not 0 < v < seq:
            raise InvalidEventError(
                f"surface.{name} must be the seq of an earlier event (1..{seq - 1}), got {v!r}",
                field=f"$.surface.{name}",
            )
    return op


def check_sources(value: Any, seq: int) -> list[int] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise SurfaceError(
            f"sources must be a list of seqs, not {type(value).__name__}", field="$.sources"
        )
    out = list(value)
    seen: set[int] = set()
    for i, s in enumerate(out):
        if type(s) is not int or not 0 <= s < seq:
            raise SurfaceError(
                f"sources must reference earlier events (0..{seq - 1}), got {s!r}",
                field=f"$.sources[{i}]",
            )
        if s in seen:
            raise SurfaceError(f"seq {s} appears twice in sources", field=f"$.sources[{i}]")
        seen.add(s)
    return out


def encode_event(
    seq: int,
    type_: str,
    now: int,
    data: dict[str, Any],
    surface: Any,
    sources: list[int] | None,
    key: str | None,
    ignorable: bool,
) -> tuple[bytes, Event]:
    """Encode once, gate, frame: return the line and the event as a reader will see it."""
    out = _Out(seq, type_, now, data, surface, sources, key, ignorable)
    try:
        body = encoder.encode(out)
    except (TypeError, ValueError, OverflowError, RecursionError, UnicodeEncodeError):
        raise encode_error(data, "$.data", 1) from None
    line = _framing.frame(body)
    try:
        event = _decoder.decode(line)
    except RecursionError:  # nested too deep to read back from this call stack: say where
        raise encode_error(data, "$.data", 1) from None
    if event.data != data or suspect(body):  # the gate's fast path, inlined: it runs per append
        check_lossless(data, body, event.data, "$.data", 1)
    return line, event


def write_all(ops: _fs.FileOps, fd: int, data: bytes) -> None:
    n = ops.write(fd, data)
    if n == len(data):
        return  # the usual case: a regular file takes the whole write
    view = memoryview(data)[max(n, 0) :]
    while view:
        n = ops.write(fd, view)  # type: ignore[arg-type]
        if n <= 0:  # pragma: no cover - write() returning 0 on a regular file
            raise OSError(errno.EIO, "short write")
        view = view[n:]


def publish(tmp: Path, path: Path) -> None:
    """Give the finished temp file its name without ever replacing an existing file."""
    try:
        os.link(tmp, path, follow_symlinks=False)
    except FileExistsError:
        raise SessionExistsError("session file already exists", path=path) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        # File systems without hard links: O_EXCL creation is still exclusive.
        fd = _fs.create_exclusive(path)
        try:
            write_all(_fs.FileOps(), fd, tmp.read_bytes())
            os.fsync(fd)
        finally:
            os.close(fd)


def load_keys(fd: int, end: int) -> dict[str, int]:
    keys: dict[str, int] = {}
    for off, raw in _framing.iter_lines(fd, 0, end):
        if b'"key":' in raw:
            event = _decoder.decode(raw)
            if event.key is not None:
                keys.setdefault(event.key, off)
    return keys


def read_line(fd: int, off: int) -> bytes:
    for _off, raw in _framing.iter_lines(fd, off):
        return raw
    raise JsonltapeError("line vanished", offset=off)  # pragma: no cover


def prepare_event(
    type_: str,
    data: Any,
    surface: Any,
    sources: Any,
    key: str | None,
    ignorable: Any,
    seq: int,
    now: int,
) -> tuple[bytes, Event]:
    """Validate one event request and encode it as line ``seq``: (line bytes, event)."""
    if type(type_) is not str or type_ not in _GOOD_TYPES:  # a list or dict is unhashable
        validate_type_name(type_)
        _GOOD_TYPES.add(type_)
    if type_ in _WRITER_ONLY:
        raise InvalidEventError(f"{type_} events are written by the writer itself", field="$.type")
    if data is None:
        data = {}
    elif not isinstance(data, dict):
        if isinstance(data, Mapping):
            data = dict(data)
        else:
            raise InvalidEventError(
                f"data must be a JSON object, not {type(data).__name__}", field="$.data"
            )
    if surface is not None or type_ == "surface/retract":
        surface = check_surface(type_, surface, seq)
    elif type_ in SURFACE_TYPES:  # the common case without a call: a message appends
        surface = "append"
    if sources is not None:
        sources = check_sources(sources, seq)
    if ignorable is None:
        ignorable = type_ in IGNORABLE_TYPES
    elif type(ignorable) is not bool:
        raise InvalidEventError("ignorable must be true or false", field="$.ignorable")
    elif not ignorable and type_ in IGNORABLE_TYPES:
        raise InvalidEventError(f"{type_} is always ignorable", field="$.ignorable")
    elif ignorable and type_ in SURFACE_TYPES:
        raise InvalidEventError(
            f"{type_} is model-visible and cannot be ignorable", field="$.ignorable"
        )
    if not ignorable and type_ not in CORE_TYPES:
        # Spec §8.7.1: a writer refuses what would make the file fail to fold, and a fold
        # refuses an unknown type that readers may not skip.
        raise InvalidEventError(
            f"unknown event type {type_!r}: readers could not fold past it; if readers may "
            'skip it, mark it ignorable ("ignorable": true in the event, --ignorable on the '
            "command line, ignorable=True in Python)",
            field="$.type",
        )
    line = encode_event(seq, type_, now, data, surface, sources, key, ignorable)
    validate_fast(type_, line[1].data, data)
    if (
        type_ not in _PLAIN
        and surface in (None, "append")
        and ignorable is (type_ in IGNORABLE_TYPES)
    ):
        # This type is known good now with its defaults, which are all a plain append needs
        # (an unknown type is good only when the caller marks it ignorable: never cached).
        _PLAIN[type_] = (
            "append" if type_ in SURFACE_TYPES else None,
            type_ in IGNORABLE_TYPES,
        )
    return line


#: Per event type, what :func:`prepare_plain` needs: (default surface, default ignorable).
#: Filled by :func:`prepare_event` the first time it accepts a type, so a type gets here only
#: after its name and rules were checked once.
_PLAIN: dict[str, tuple[Literal["append"] | None, bool]] = {}


def prepare_plain(type_: str, data: Any, seq: int) -> tuple[bytes, Event]:
    """:func:`prepare_event` for the most frequent call, ``append(type, data)`` with every
    other member left to its default, at the current time.

    Same checks, same bytes, fewer calls: this is the path that decides whether an append is
    as cheap as a naive ``json.dumps`` + ``write`` (benchmarks/bench_core.py (a)), so the type
    rules are looked up once per type instead of checked on every call.
    """
    plain = _PLAIN.get(type_) if type(type_) is str else None
    if plain is None or type(data) is not dict:
        return prepare_event(type_, data, None, None, None, None, seq, time.time_ns() // 1_000_000)
    surface, ignorable = plain
    line, event = encode_event(
        seq, type_, time.time_ns() // 1_000_000, data, surface, None, None, ignorable
    )
    validate_fast(type_, event.data, data)
    return line, event
