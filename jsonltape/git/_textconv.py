"""The committed events of a session as a transcript for ``git diff`` (``diff.jsonltape.textconv``).

Exactly one output line per good line of the file, so ``git diff --stat`` counts events::

    <seq>  <time>  <what>: <text>

* ``seq`` right-aligned to 6 digits; ``time`` in UTC (``2026-12-01 09:44:05Z``), never local
  time, so the output depends on the file alone (no clock, no locale, no terminal);
* ``what``: the role for a message (``user``, ``system``, ``assistant``, ``tool``), else the
  event type; a surface op is shown after it (``[replaces 3..5]``, ``[retracts 3..5]``);
* the text on one line: a newline is shown as ``⏎``, a tab as ``\\t``, every other control or
  format character (ESC, DEL, C1 controls, bidi overrides, line separators) as a Python
  escape (``\\x1b``, ``\\u202e``), so no terminal sequence from a session reaches the pager;
  cut at :data:`TEXT_WIDTH` characters with ``…``;
* tool calls as ``name {arguments}``: arguments as compact JSON, cut at :data:`ARGS_WIDTH`;
* a checkpoint as ``checkpoint`` (``checkpoint, closed`` for a clean close): one short line
  that never changes once written, shown so that seqs stay continuous; no offsets or CRCs;
* what a merge recorded (spec §8.7.14): a ``branch/start`` receipt as ``branch/start at A
  head H, N recorded from SOURCE``; a ``branch/event`` as the line it records, shown like any
  other event (with that line's time) after ``[branch R, seq S]``: its receipt and its seq in
  the version it came from.

A damaged file never fails (git would fail the whole diff): the good lines are printed, then one
line starting with ``!`` says where and what is wrong (torn tail or corrupt, with its line and
byte). A file that is not a session prints one ``!`` line and then its lines escaped and cut.
The file is read in chunks through the reader's scan: memory stays flat for any size.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from .. import _framing, _fs
from .._display import shown
from .._lines import Bad, decode, scan
from .._records import recorded
from .._scan import read_header, witness_after
from .._time import format_ms
from ..errors import JsonltapeError
from ..events import Event, Replace, Retract

__all__ = ["ARGS_WIDTH", "TEXT_WIDTH", "Sink", "escape", "event_line", "textconv"]

#: Characters of text shown per event before the cut (``…``).
TEXT_WIDTH = 200
#: Characters of a tool call's arguments (compact JSON) shown before the cut.
ARGS_WIDTH = 80
_enc = msgspec.json.Encoder()


def escape(text: str, width: int = TEXT_WIDTH) -> str:
    """``text`` as one line of at most ``width`` characters (see the module doc)."""
    piece = text[: width + 1]
    if not piece.isprintable():  # the display rule, a line break shown as ⏎
        piece = shown(piece.replace("\n", "⏎"))
    if len(piece) > width or len(text) > width + 1:
        return piece[: width - 1] + "…"
    return piece


def _json(value: Any, width: int) -> str:
    try:
        text = _enc.encode(value).decode()
    except (TypeError, ValueError, OverflowError):
        text = repr(value)
    return escape(text, width)


def _parts(message: Any) -> str:
    """A message's parts as one text: texts as they are, other parts described."""
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        return ""
    out = []
    for p in message["parts"]:
        if not isinstance(p, dict):
            continue
        kind = p.get("type")
        if kind == "text":
            out.append(str(p.get("content", "")))
        elif kind == "reasoning":
            out.append(f"[reasoning: {p.get('content', '')}]")
        elif kind == "tool_call":
            out.append(f"[call {p.get('name')} {_json(p.get('arguments'), ARGS_WIDTH)}]")
        elif kind == "tool_call_response":
            response = p.get("response")
            out.append(response if isinstance(response, str) else _json(response, TEXT_WIDTH))
        else:
            out.append(f"[{_describe(p)}]")
        if len(out) > 1 and sum(len(x) for x in out) > TEXT_WIDTH:
            break  # the rest would be cut anyway
    return " ".join(out)


def _describe(part: dict[str, Any]) -> str:
    # The exporters' own words for a blob, uri or file part. Imported here, when such a part
    # is met: the interop package costs ~90 ms to import and most sessions have none.
    from ..interop._render import _describe as describe

    return describe(part)


def _message(event: Event) -> str:
    data = event.data
    message = data.get("message")
    role = message.get("role") if isinstance(message, dict) else None
    text = _parts(message)
    if event.type == "tool/result":
        call = data.get("call_id")
        parts = message.get("parts") if isinstance(message, dict) else None
        bad = bool(data.get("error")) or any(
            isinstance(p, dict) and p.get("is_error") is True
            for p in (parts if isinstance(parts, list) else ())
        )
        return f"tool ({escape(str(call), 40)}{', error' if bad else ''}): {escape(text)}"
    return f"{escape(str(role or event.type), 40)}: {escape(text)}"


def _checkpoint(event: Event) -> str:
    return "checkpoint, closed" if event.data.get("closed") is True else "checkpoint"


def _tool_call(event: Event) -> str:
    d = event.data
    return f"tool/call {escape(str(d.get('name')), 60)} {_json(d.get('arguments'), ARGS_WIDTH)}"


def _turn_end(event: Event) -> str:
    d = event.data
    bits = [str(d.get("reason"))]
    if d.get("synthetic") is True:
        bits.append("synthetic")
    error = d.get("error")
    if isinstance(error, dict) and error.get("message"):
        bits.append(str(error["message"]))
    return "turn/end " + escape(", ".join(bits))


def _summary(field: str) -> Callable[[Event], str]:
    def show(event: Event) -> str:
        return f"{event.type}: {escape(str(event.data.get(field, '')))}"

    return show


def _todos(event: Event) -> str:
    todos = event.data.get("todos")
    items = todos if isinstance(todos, list) else []
    text = "; ".join(
        f"[{t.get('status')}] {t.get('content')}" for t in items if isinstance(t, dict)
    )
    return f"todo/write ({len(items)}): {escape(text)}"


def _fork(event: Event) -> str:
    d = event.data
    return escape(f"{event.type} {d.get('fork')} at {d.get('at')} head {d.get('head')}")


def _receipt(event: Event) -> str:
    d = event.data
    source = d.get("source")
    text = f"branch/start at {d.get('at')} head {d.get('head')}, {d.get('count')} recorded"
    return text + (f" from {escape(source, 80)}" if isinstance(source, str) else "")


_SHOW: dict[str, Callable[[Event], str]] = {
    "user/message": _message,
    "assistant/message": _message,
    "tool/result": _message,
    "session/flush": _checkpoint,
    "tool/call": _tool_call,
    "turn/end": _turn_end,
    "compaction/summary": _summary("summary"),
    "handoff/anchor": _summary("summary"),
    "surface/retract": _summary("reason"),
    "todo/write": _todos,
    "fork/merge": _fork,
    "fork/discard": _fork,
    "branch/start": _receipt,
}
_BARE = frozenset({"turn/start", "step/start", "step/end"})


def event_line(event: Event) -> str:
    """One event as its transcript line (without the newline)."""
    return f"{event.seq:>6}  {format_ms(event.time)}  {_what(event)}"


def _recorded_line(event: Event, body: bytes) -> str:
    """A ``branch/event`` (its good line ``body``) as the line it records, marked with its
    receipt and that line's seq; the time is the recorded line's."""
    rec = recorded(body)
    line = decode(rec.line)  # a good line on its own: the scan checked it
    return (
        f"{event.seq:>6}  {format_ms(line.time)}  [branch {rec.branch}, seq {line.seq}] "
        + _what(line)
    )


def _what(event: Event) -> str:
    show = _SHOW.get(event.type)
    if show is not None:
        what = show(event)
    elif event.type in _BARE:
        what = event.type
    else:
        what = f"{escape(event.type, 60)} {_json(event.data, TEXT_WIDTH)}"
    surface = event.surface
    if isinstance(surface, Replace):
        what += f" [replaces {surface.start}..{surface.end}]"
    elif isinstance(surface, Retract):
        what += f" [retracts {surface.start}..{surface.end}]"
    return what


def _header_line(event: Event) -> str:
    d = event.data
    bits = [f"session {escape(str(d.get('id')), 128)}"]
    for name in ("title", "agent", "cwd"):
        if isinstance(d.get(name), str):
            bits.append(f"{name} {escape(d[name], 120)}")
    parent = d.get("parent")
    if isinstance(parent, dict):
        bits.append(f"forked from {escape(str(parent.get('session')), 128)} at {parent.get('seq')}")
    return f"{event.seq:>6}  {format_ms(event.time)}  session/start: " + "; ".join(bits)


class Sink(Protocol):
    """Where the transcript goes: anything with a ``write(bytes)`` (``sys.stdout.buffer``)."""

    def write(self, data: bytes, /) -> object: ...


def textconv(path: str | os.PathLike[str], out: Sink) -> None:
    """Write the transcript of the session at ``path`` to ``out`` (see the module doc).

    Only an unreadable path raises (no such file, not a regular file); damage is reported in
    the output.
    """
    fd = _fs.open_for_read(_fs.session_path(path))
    try:
        _convert(fd, str(path), out)
    finally:
        os.close(fd)


def _emit(out: Sink, text: str) -> None:
    out.write(text.encode("utf-8", "backslashreplace") + b"\n")


def _convert(fd: int, path: str, out: Sink) -> None:
    try:
        read_header(fd, path)
    except JsonltapeError as exc:
        _emit(out, f"! not a jsonltape session: {escape(exc.message)}")
        for _off, raw in _framing.iter_lines(fd, 0):
            _emit(out, escape(raw.rstrip(b"\n").decode("utf-8", "replace")))
        return
    for item in scan(fd, 0, 0):
        if isinstance(item, Bad):
            _emit(out, _bad_line(fd, item))
            return
        _off, body, event = item
        if event.seq == 0:
            _emit(out, _header_line(event))
        elif event.type == "branch/event":
            _emit(out, _recorded_line(event, body))
        else:
            _emit(out, event_line(event))


def _bad_line(fd: int, bad: Bad) -> str:
    where = f"line {bad.line}, byte {bad.offset}"
    size = os.fstat(fd).st_size
    if bad.too_deep:
        return f"! {where}: nests too deep to show; the {size - bad.offset} bytes from here on"
    if witness_after(fd, bad.offset + len(bad.raw)):
        return (
            f"! corrupt at {where}: {escape(bad.problem)}; the {size - bad.offset} bytes from "
            "here on are not shown"
        )
    return (
        f"! torn tail at {where}: {escape(bad.problem)}; {size - bad.offset} bytes not "
        "committed (a writer mid-write, or a crash: `jsonltape repair`)"
    )
