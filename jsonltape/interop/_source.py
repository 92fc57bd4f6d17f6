"""Reading a foreign session file: complete lines, decoded, numbered, never fatal.

Every physical line is yielded with its 1-based number, its byte offset and its text exactly as
stored (without the newline). A line that is not a JSON object is yielded too, with the reason,
so the importer can keep it verbatim and report it. A last fragment without a newline is a line
still being written (or torn by a crash): it is held back unless it already parses as a JSON
object (then only the newline is missing), and reported.

A line nested deeper than :data:`MAX_DEPTH` levels is not decoded at all (one problem naming
the byte where it goes too deep): the decoders recurse once per level within Python's recursion
limit, so without a fixed limit the same line would decode or not depending on the call stack.

Values are decoded with msgspec; a line msgspec refuses only because of a lone surrogate escape
(JavaScript writers produce them when they cut an emoji in half) is decoded by the standard
library instead. Values jsonltape cannot store losslessly (lone surrogates, integers beyond
±(2**53-1), negative zero) are made storable and the line is flagged ``sanitized``; its raw text
is kept unchanged either way.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import urllib.parse
from array import array
from collections.abc import Callable, Iterator
from datetime import datetime
from itertools import accumulate
from typing import Any, BinaryIO, NamedTuple

import msgspec

from .._gate import outside_strings

__all__ = [
    "MAX_DEPTH",
    "Follow",
    "SourceLine",
    "SourceReader",
    "Unit",
    "parse_time",
    "path_of_uri",
    "rendering",
    "split_records",
    "too_deep",
]

_decode = msgspec.json.decode
#: How much of a text source is decoded at once (:meth:`SourceReader._text_lines`).
_TEXT_BLOCK = 1 << 20
#: The deepest nesting of arrays and objects an importer decodes. Sources may nest deeper than
#: the format's 128 levels (what lies deeper is stored as JSON text, ``_core.within_depth``);
#: this bounds the decoders' recursion (about 1,000 Python frames in all) with room to spare.
MAX_DEPTH = 512
#: What the walk that names the place looks at: an escape, a quote, a bracket.
_LEX = re.compile(rb'\\.|["\[\]{}]', re.S)
#: Brackets as steps of the depth (+1, -1 as signed bytes); everything else is dropped.
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_MAX_SAFE = 2**53 - 1
_SURROGATE = re.compile(rb"\\u[dD][89abAB]|\\u[dD][c-fC-F]")
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0000000000")
_NEG_ZERO = re.compile(rb"-0(?:\.0+)?(?:[eE][-+]?\d+)?(?![\d.eE])")
_LONE = re.compile("[\ud800-\udfff]")
_FRACTION = re.compile(r"^(.*T\d\d:\d\d:\d\d)\.(\d+)(.*)$")


class SourceLine(NamedTuple):
    """One physical line of a source file."""

    n: int
    """1-based line number."""
    offset: int
    """Byte offset of the line's first byte."""
    raw: str
    """The line's text without its newline (invalid UTF-8 is replaced; see ``error``)."""
    value: dict[str, Any] | None
    """The decoded JSON object, or None if the line is not one."""
    error: str | None
    """Why ``value`` is None (malformed JSON, not an object, invalid UTF-8, blank)."""
    sanitized: bool = False


class Unit(NamedTuple):
    """One foreign session that is not a JSONL file of its own (a Gemini CLI ``.json`` chat
    saved whole, an OpenCode session in ``opencode.db`` or its JSON storage tree), rendered as
    JSONL: one record per line, in the order the agent made them, so that everything after it
    (lines, offsets, the prefix check, re-import, read-only indexing) is the same as for a file.

    A source that rewrites its records in place (a reply still streaming) must only ever *grow*
    the rendering: the records that can still change are rendered last and counted in ``held``.
    """

    path: str
    """The file the records come from (recorded in the session's ``meta.import.file``)."""
    name: str
    """Unique within the source (the session id derives from it): the file name, or
    ``opencode.db#ses_...`` for one session of a database."""
    size: int
    """A cheap change counter (bytes or rows); with ``mtime_ns`` it decides "unchanged"."""
    mtime_ns: int
    """When the unit last changed (nanoseconds since the epoch)."""
    render: Callable[[bool], tuple[bytes, int]]
    """``render(settled)`` -> ``(jsonl, held)``: every line ends with a newline; the last
    ``held`` bytes are records that may still change (0 when ``settled``: nothing will). The
    bytes are the same either way (an import renders a unit once)."""
    title: str | Callable[[], str | None] | None = None
    """The session's own title, as the agent shows it, when the source keeps one beside the
    records and rewrites it in place (an OpenCode session's): never one of the records, which
    only grow; an import titles the session with it, and a later import that finds it changed
    appends a ``session/title``. A callable reads it when it is needed (an Amp thread's is in
    the document, which an unchanged thread is never read for)."""
    created: int | None = None
    """When the session was created (epoch ms), when the source keeps that beside its records
    and not in them (Continue's ``sessions.json``): the header's ``created``."""


def rendering(records: list[bytes], held_from: int | None) -> tuple[bytes, int]:
    """A unit's rendering (:attr:`Unit.render`) from its records, each encoded as one line: the
    JSONL bytes and how many of them, from record ``held_from`` on (None: none), may still
    change."""
    body = b"".join(line + b"\n" for line in records)
    if held_from is None:
        return body, 0
    return body, sum(len(line) + 1 for line in records[held_from:])


def _suspect(raw: bytes) -> bool:
    if b"\\u" in raw and _SURROGATE.search(raw) is not None:
        return True
    if b"0" * 16 in raw.translate(_DIGITS_AS_ZERO):
        return True
    return b"-0" in raw and _NEG_ZERO.search(raw) is not None


def _clean(value: Any) -> tuple[Any, bool]:
    """Make a decoded value storable by jsonltape; return it and whether anything changed."""
    if isinstance(value, str):
        if _LONE.search(value) is None:
            return value, False
        return _LONE.sub("\ufffd", value), True
    if isinstance(value, bool) or value is None:
        return value, False
    if isinstance(value, int):
        if -_MAX_SAFE <= value <= _MAX_SAFE:
            return value, False
        return str(value), True
    if isinstance(value, float):
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return 0.0, True
        return value, False
    if isinstance(value, list):
        changed = False
        out_list = []
        for item in value:
            v, c = _clean(item)
            out_list.append(v)
            changed = changed or c
        return out_list, changed
    if isinstance(value, dict):
        changed = False
        out_dict = {}
        for k, item in value.items():
            key, ck = _clean(k)
            v, c = _clean(item)
            out_dict[key] = v
            changed = changed or c or ck
        return out_dict, changed
    return value, False  # pragma: no cover - JSON decodes to the types above


def too_deep(raw: bytes, limit: int = MAX_DEPTH) -> str | None:
    """Why the JSON text ``raw`` is not decoded, when it nests arrays and objects deeper than
    ``limit`` levels (naming the byte where it does), else None.

    Two ``count`` calls decide most texts: fewer openers than levels cannot nest too deep.
    Others are measured by passes at C speed (strings cut out, the brackets' running sum); only
    a text that is refused is walked byte by byte, to name the place.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit or _depth(raw) <= limit:
        return None
    depth = 0
    inside = False
    for m in _LEX.finditer(raw):
        c = raw[m.start()]
        if c == 0x22:
            inside = not inside
        elif inside or c == 0x5C:  # in a string, or an escape (only strings have them)
            continue
        elif c in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return f"arrays and objects nest deeper than {limit} levels (at byte {m.start()})"
        else:
            depth -= 1
    # Only a text that is not JSON gets here (a backslash outside strings, which the walk
    # reads as an escape): the decoder stops there, no deeper than the walk went.
    return None


def _depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects in ``raw``, what strings hold left out."""
    outside = outside_strings(raw)
    return max(accumulate(array("b", outside.translate(_STEP, _NOT_BRACKET))), default=0)


def _parse(body: bytes) -> tuple[dict[str, Any] | None, str | None, bool]:
    deep = too_deep(body)
    if deep is not None:
        return None, deep, False
    try:
        value = _decode(body)
    except msgspec.DecodeError as exc:
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):
            return None, f"malformed JSON ({exc})", False
    except RecursionError:
        return None, "malformed JSON (nested too deeply)", False
    if not isinstance(value, dict):
        return None, f"not a JSON object (a {type(value).__name__})", False
    if _suspect(body):
        cleaned, changed = _clean(value)
        return cleaned, None, changed
    return value, None, False


#: A text source's ``follow`` (:meth:`SourceReader.read`): ``(texts, start, end, n) -> taken``.
Follow = Callable[[list[str], int, int, int], int]


class SourceReader:
    """Iterate the complete lines of a file; afterwards ``consumed``, ``sha256`` and ``torn``
    say how far it read, the hash of those bytes, and what was held back.

    ``stop_lines`` limits reading to a number of lines. With ``data`` the lines are read from
    memory (a :class:`Unit`'s rendering; ``size`` and ``mtime_ns`` are then the unit's), its
    last ``held`` bytes held back like an unfinished last line. With ``text`` the file is not
    JSONL but text (an Aider Markdown history): each complete line is the record ``{"text":
    line}``, a blank one too, and a last line without its newline is still being written.
    """

    def __init__(
        self,
        path: str,
        *,
        stop_lines: int | None = None,
        data: bytes | None = None,
        held: int = 0,
        size: int = 0,
        mtime_ns: int = 0,
        text: bool = False,
    ) -> None:
        self.path = path
        self.text = text
        self.stop_lines = stop_lines
        self.consumed = 0
        self.lines = 0
        self.torn: tuple[int, int, int] | None = None  # (line, offset, bytes)
        self._hash = hashlib.sha256()
        self._data = data
        self._held = held
        self.size = size
        self.mtime_ns = mtime_ns

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()

    def read(self, follow: Follow | None = None) -> Iterator[SourceLine]:
        """The lines, one :class:`SourceLine` each. ``follow`` (a text source's only): after a
        line has been handled, ``follow(texts, start, end, n)`` may take the lines that come
        next as one step (see :meth:`~._core.Mapper.follow`); it returns how many of
        ``texts[start:end]`` (line ``n`` first) it took, and those are read but not yielded."""
        if self._data is not None:
            complete = self._data[: len(self._data) - self._held]
            yield from self._lines(io.BytesIO(complete), follow)
            if self._held and (self.stop_lines is None or self.lines < self.stop_lines):
                self.torn = (self.lines + 1, len(complete), self._held)
            return
        with open(self.path, "rb") as f:
            st = os.fstat(f.fileno())
            self.size, self.mtime_ns = st.st_size, st.st_mtime_ns
            yield from self._lines(f, follow)

    def _lines(self, f: BinaryIO, follow: Follow | None) -> Iterator[SourceLine]:
        if self.text:
            yield from self._text_lines(f, follow)
            return
        offset = 0
        stop, plain, update, line = self.stop_lines, self.text, self._hash.update, self._line
        for n, chunk in enumerate(f, 1):
            if stop is not None and n > stop:
                return
            if chunk[-1:] == b"\n":
                body = chunk[:-1]
            else:
                body = chunk
                value = None if plain else _parse(body)[0]
                if value is None:  # still being written, or torn by a crash
                    self.torn = (n, offset, len(chunk))
                    return
            update(chunk)
            end = offset + len(chunk)
            self.consumed = end
            self.lines = n
            yield line(n, offset, body, plain)
            offset = end

    def _text_lines(self, f: BinaryIO, follow: Follow | None) -> Iterator[SourceLine]:
        """The lines of a text source (each line its record), as :meth:`_lines` reads a JSONL
        one, a block at a time: decoding and hashing each line alone cost a third of an Aider
        import (a hundred thousand short lines). A block that is not valid UTF-8 is decoded
        line by line, for each line's own verdict (and offered to no ``follow``); a last
        fragment without its newline is held back (``torn``), never a record."""
        stop, update, one = self.stop_lines, self._hash.update, self._line
        n = offset = 0
        held = bytearray()
        while stop is None or n < stop:
            block = f.read(_TEXT_BLOCK)
            if not block:
                break
            cut = block.rfind(b"\n") + 1
            if not cut:  # no line ends here (a long line): only appended, never rescanned
                held += block
                continue
            data = bytes(held) + block[:cut] if held else block[:cut]
            held = bytearray(block[cut:])
            bodies = data.split(b"\n")
            bodies.pop()  # the empty text after the block's last newline
            if stop is not None and n + len(bodies) > stop:
                del bodies[stop - n :]
                data = data[: sum(map(len, bodies)) + len(bodies)]
                held.clear()
            try:
                texts: list[str] | None = data.decode("utf-8").split("\n")
            except UnicodeDecodeError:
                texts = None
            start = offset
            count = len(bodies)
            i = 0
            try:
                while i < count:
                    body = bodies[i]
                    n += 1
                    at, offset = offset, offset + len(body) + 1
                    self.consumed, self.lines = offset, n
                    if texts is None:
                        yield one(n, at, body, True)
                    else:
                        text = texts[i]
                        yield SourceLine(n, at, text, {"text": text}, None)
                    i += 1
                    if follow is not None and texts is not None and i < count:
                        k = follow(texts, i, count, n + 1)
                        if k:
                            n += k
                            offset += sum(map(len, bodies[i : i + k])) + k
                            self.consumed, self.lines = offset, n
                            i += k
            finally:  # what was consumed, also when the reader stops early
                update(memoryview(data)[: offset - start])
        if held and (stop is None or n < stop):
            self.torn = (n + 1, offset, len(held))

    @staticmethod
    def _line(n: int, offset: int, body: bytes, plain: bool = False) -> SourceLine:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = body.decode("utf-8", "replace")
            return SourceLine(n, offset, text, None, f"invalid UTF-8 at byte {exc.start}")
        if plain:  # a line of a text file: its text is the record
            return SourceLine(n, offset, text, {"text": text}, None)
        if not text.strip():
            return SourceLine(n, offset, text, None, "blank line")
        value, error, sanitized = _parse(body)
        return SourceLine(n, offset, text, value, error, sanitized)


def split_records(data: bytes) -> tuple[list[bytes], bytes]:
    """The lines of ``data`` as :class:`SourceReader` reads them: complete lines (without their
    newline), and an unfinished last line (``b""`` if there is none). A last line without its
    newline that already is a JSON object is a line, not unfinished."""
    records = data.split(b"\n")
    tail = records.pop()
    if tail and _parse(tail)[0] is not None:
        records.append(tail)
        tail = b""
    return records, tail


def prefix_sha256(path: str, nbytes: int) -> str | None:
    """SHA-256 of the first ``nbytes`` of a file, or None if it is shorter."""
    h = hashlib.sha256()
    left = nbytes
    with open(path, "rb") as f:
        while left > 0:
            chunk = f.read(min(left, 1 << 20))
            if not chunk:
                return None
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def parse_time(value: Any) -> int | None:
    """Epoch milliseconds from an ISO 8601 string ("2025-09-07T09:52:03.071Z") or a number
    (seconds below 1e11, else milliseconds); None if it is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        ms = value * 1000 if abs(value) < 1e11 else value
        return int(ms) if abs(ms) <= _MAX_SAFE else None
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    m = _FRACTION.match(text)
    if m is not None:  # Python 3.10 takes only 3 or 6 fraction digits
        text = m.group(1) + "." + (m.group(2) + "000000")[:6] + m.group(3)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        return None
    return int(dt.timestamp() * 1000)


def path_of_uri(value: Any) -> str | None:
    """The path a ``file://`` URI names, as its agent's platform writes it (VS Code and its
    forks keep workspaces as URIs: ``file:///home/u/p``, ``file:///c%3A/Users/u/p`` for
    ``c:/Users/u/p``); another string as it is; None for what is not a string."""
    if not isinstance(value, str) or not value:
        return None
    if not value.startswith("file://"):
        return value
    parsed = urllib.parse.urlsplit(value)
    path = urllib.parse.unquote(parsed.path)
    if re.match(r"^/[A-Za-z]:", path):  # a Windows drive: no leading slash
        path = path[1:]
    if parsed.netloc and parsed.netloc != "localhost":  # a UNC share
        path = f"//{parsed.netloc}{path}"
    return path or None
