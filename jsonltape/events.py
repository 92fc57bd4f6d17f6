"""The event envelope, the header, the core vocabulary and its data shapes (msgspec Structs).

Decoding is two-stage on purpose: the envelope is decoded into :class:`Event` with ``data`` as
a plain dict, and a core type's data is only checked against its Struct when someone needs it
(the writer before appending, the fold when folding). Unknown event types and unknown content
parts therefore never fail a read; they stay plain dicts. Tools copy raw lines and never
re-encode a decoded event they did not write.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, NamedTuple, Union

import msgspec

# MAX_INT and MAX_TIME live in _limits (no imports) so the CLI can load them without Structs.
from ._limits import MAX_INT, MAX_TIME
from .errors import FormatError, InvalidEventError, UnsupportedVersionError

__all__ = [
    "CORE_TYPES",
    "FORMAT",
    "IGNORABLE_TYPES",
    "MAX_INT",
    "MAX_TIME",
    "MESSAGE_ROLES",
    "SURFACE_TYPES",
    "TURN_END_REASONS",
    "VERSION",
    "BranchEventData",
    "BranchOrigin",
    "BranchStartData",
    "Event",
    "FlushData",
    "HeaderData",
    "Line",
    "Message",
    "ParentRef",
    "Replace",
    "Retract",
    "SessionTitleData",
    "Sha256Hex",
    "Span",
    "Surface",
    "TurnRef",
    "check_header",
    "validate_data",
    "validate_type_name",
]

FORMAT = "jsonltape"
#: Major format version written by this library and the newest one it reads.
VERSION = 1
#: Minor version: additive changes only (new optional members, new types).
MINOR = 1


#: A seq (and a surface bound or a ``sources`` item): 0 … 2**53-1 (spec §6).
SeqInt = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)]
#: An event time in epoch milliseconds: 0 … 9999-12-31 (spec §6).
TimeInt = Annotated[int, msgspec.Meta(ge=0, le=MAX_TIME)]


# Envelope Structs forbid unknown members so that the one decode that checks a line
# (jsonltape._lines.decode) learns when a line has any: msgspec skips an unknown member without
# looking at its bytes, and the good-line test covers every byte (spec §4, §10.2).
class Replace(
    msgspec.Struct, frozen=True, tag_field="op", tag="replace", forbid_unknown_fields=True
):
    """Replace the current surface nodes from seq ``start`` to seq ``end`` with this event."""

    start: SeqInt
    end: SeqInt


class Retract(
    msgspec.Struct, frozen=True, tag_field="op", tag="retract", forbid_unknown_fields=True
):
    """Remove the current surface nodes from seq ``start`` to seq ``end`` (no replacement)."""

    start: SeqInt
    end: SeqInt


Surface = Union[Literal["append"], Replace, Retract]


class Event(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """The envelope (spec §6): one decoded line. Unknown envelope members are kept in the raw
    line only.

    The one model of the envelope for reading and writing: readers decode every line into it
    (its bounds are the good-line test's), and the writer encodes an Event with ``crc`` left
    empty, which ``omit_defaults`` leaves out with every other default (the members in
    canonical order, no ``null``, no ``"ignorable": false``), then decodes its own line back
    with the readers' decoder, so it never writes a member a reader would refuse.
    """

    seq: SeqInt
    type: str
    time: TimeInt
    data: dict[str, Any]
    surface: Surface | None = None
    sources: list[SeqInt] | None = None
    key: str | None = None
    ignorable: bool = False
    crc: str = ""


class Line(NamedTuple):
    """A committed line: where it starts, its exact bytes (with ``\\n``) and the decoded event."""

    offset: int
    raw: bytes
    event: Event


# ---------------------------------------------------------------------------------------------
# Data shapes of the core vocabulary. Unknown members inside data are allowed (minor versions
# add optional members); the writer schema in spec/schema/ is the closed variant.


class ParentRef(msgspec.Struct, frozen=True, omit_defaults=True):
    """Fork origin: the parent session id, the seq forked at, a path hint and that line's crc."""

    session: str
    seq: SeqInt
    path: str | None = None
    crc: str | None = None


class HeaderData(msgspec.Struct, frozen=True, omit_defaults=True):
    """``data`` of ``session/start`` (line 0)."""

    format: Literal["jsonltape"]
    version: int
    id: str
    created: TimeInt
    minor: int = 0
    title: str | None = None
    cwd: str | None = None
    agent: str | None = None
    parent: ParentRef | None = None
    meta: dict[str, Any] | None = None


class TurnRef(msgspec.Struct, frozen=True):
    """Where the turn that is open at a checkpoint started."""

    seq: int
    offset: int


#: Eight lowercase hex digits: a CRC-32 as the format writes it (spec §5). (The length bounds
#: are not redundant: msgspec matches patterns with Python's ``re``, whose ``$`` also matches
#: before a final newline, so ``"0badc0de\n"`` would pass the pattern alone.)
Crc8 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{8}$", min_length=8, max_length=8)]


class Span(msgspec.Struct, frozen=True):
    """``data.span`` of a checkpoint (format 1.1): the CRC-32 of the bytes ``[from, offset)``,
    every line since the previous checkpoint (or the header), so a reader checks them with one
    CRC instead of one per line (spec §10.2)."""

    from_: Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)] = msgspec.field(name="from")
    crc: Crc8


class FlushData(msgspec.Struct, frozen=True, omit_defaults=True):
    """``data`` of ``session/flush``: a checkpoint. Every byte before ``offset`` is durable."""

    offset: int
    seq: int
    turn: TurnRef | None = None
    closed: bool = False
    span: Span | None = None


class ErrorInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    code: str
    message: str = ""
    name: str | None = None


class Message(msgspec.Struct, frozen=True, omit_defaults=True):
    """A model-visible message: OpenTelemetry GenAI shape (role + typed parts)."""

    id: str
    role: Literal["system", "user", "assistant", "tool"]
    parts: list[dict[str, Any]]
    name: str | None = None


class TextPart(msgspec.Struct):
    content: str


class ReasoningPart(msgspec.Struct):
    content: str
    signature: str | None = None


class ToolCallPart(msgspec.Struct):
    id: str
    name: str
    arguments: Any = None


class ToolCallResponsePart(msgspec.Struct):
    id: str
    response: Any = None
    is_error: bool = False


class UriPart(msgspec.Struct):
    uri: str
    modality: str | None = None
    mime_type: str | None = None


class BlobPart(msgspec.Struct):
    content: str
    mime_type: str
    modality: str | None = None


class FilePart(msgspec.Struct):
    file_id: str
    modality: str | None = None
    mime_type: str | None = None


PART_TYPES: dict[str, type[msgspec.Struct]] = {
    "text": TextPart,
    "reasoning": ReasoningPart,
    "tool_call": ToolCallPart,
    "tool_call_response": ToolCallResponsePart,
    "uri": UriPart,
    "blob": BlobPart,
    "file": FilePart,
}

TURN_END_REASONS = ("completed", "aborted", "blocked", "error", "max-tokens", "interrupted")


class TurnStartData(msgspec.Struct):
    input: Any = None


class TurnEndData(msgspec.Struct):
    turn: int
    reason: Literal["completed", "aborted", "blocked", "error", "max-tokens", "interrupted"]
    error: ErrorInfo | None = None
    synthetic: bool = False


class StepStartData(msgspec.Struct):
    turn: int | None = None


class StepEndData(msgspec.Struct):
    step: int
    turn: int | None = None
    synthetic: bool = False


class UserMessageData(msgspec.Struct):
    message: Message


class AssistantMessageData(msgspec.Struct):
    message: Message
    model: str | None = None
    usage: dict[str, Any] | None = None
    turn: int | None = None
    step: int | None = None


class ToolCallData(msgspec.Struct):
    call_id: str
    name: str
    arguments: Any = None
    turn: int | None = None
    step: int | None = None


class ToolResultData(msgspec.Struct):
    call_id: str
    message: Message
    error: ErrorInfo | None = None
    synthetic: bool = False


class Todo(msgspec.Struct):
    content: str
    status: Literal["pending", "in_progress", "completed"]
    id: str | None = None


class TodoWriteData(msgspec.Struct):
    todos: list[Todo]


class RequestHeaderData(msgspec.Struct):
    model: str | None = None
    provider: str | None = None
    system: str | None = None
    tools: list[dict[str, Any]] | None = None
    params: dict[str, Any] | None = None


class RetractData(msgspec.Struct):
    reason: str | None = None


class AnyData(msgspec.Struct):
    """Known types whose data is free-form (e.g. streaming chunks)."""


# -- fold vocabulary: compaction, handoff, fork receipts (spec "Surface and fold semantics") --

#: A text with a character other than space, tab, LF or CR (summaries are never empty).
NonBlank = Annotated[str, msgspec.Meta(pattern=r"[^ \t\n\r]")]
#: A seq or a count: never negative.
NonNegative = Annotated[int, msgspec.Meta(ge=0)]


class CompactionStartData(msgspec.Struct):
    """``compaction/start``: the surface range ``start``..``end`` is about to be summarised."""

    start: NonNegative
    end: NonNegative
    reason: str | None = None


class FileLedgerData(msgspec.Struct, omit_defaults=True):
    """The file ledger of a compaction: paths newest first, and how many were evicted."""

    modified: list[str] = msgspec.field(default_factory=list)
    read: list[str] = msgspec.field(default_factory=list)
    evicted: NonNegative = 0


class CompactionSummaryData(msgspec.Struct):
    """``compaction/summary``: the summary text and what it shadows (before the replace)."""

    compaction: NonNegative
    summary: NonBlank
    start: NonNegative
    end: NonNegative
    count: NonNegative
    chars: NonNegative
    shadowed_chars: NonNegative
    tokens: NonNegative | None = None
    summary_tokens: NonNegative | None = None
    model: str | None = None
    ledger: FileLedgerData | None = None


class CompactionEndData(msgspec.Struct):
    """``compaction/end``: ``message`` is the summary message's seq, or ``error`` says why not."""

    compaction: NonNegative
    message: NonNegative | None = None
    error: ErrorInfo | None = None


class CompactionPruneData(msgspec.Struct):
    """``compaction/prune``: the tool result ``target`` is about to be replaced by a stub."""

    target: NonNegative
    chars: NonNegative
    tokens: NonNegative | None = None


class HandoffData(msgspec.Struct):
    """``handoff/anchor``: a fresh start: the context is rebuilt from this summary and state."""

    summary: NonBlank
    state: Any = None
    reason: str | None = None


class ForkMergeData(msgspec.Struct):
    """``fork/merge``: the receipt of merging fork ``fork`` (forked at ``at``) up to ``head``."""

    fork: str
    at: NonNegative
    head: NonNegative
    crc: str
    count: NonNegative
    path: str | None = None


class ForkDiscardData(msgspec.Struct):
    """``fork/discard``: the receipt of discarding fork ``fork``; its file is left alone."""

    fork: str
    at: NonNegative
    head: NonNegative
    crc: str
    path: str | None = None
    reason: str | None = None


# -- branches recorded by a merge (format 1.1, 1.2, spec §8.7.14) ---------------------------

#: 64 lowercase hex digits: a SHA-256 as the format writes it (1.2).
Sha256Hex = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$", min_length=64, max_length=64)]


class BranchStartData(msgspec.Struct, omit_defaults=True):
    """``branch/start``: the lines after it record another version of this session's history
    that diverged after seq ``at`` and ended at seq ``head`` (whose crc member is ``crc``);
    ``lines`` are the crc members of that version's lines ``at+1`` … ``head`` in order, and
    ``sha256`` (1.2) the SHA-256 of each of those lines (its bytes without the newline), which
    name them where a CRC-32 cannot (a collaborator can make a line with any CRC)."""

    at: SeqInt
    head: SeqInt
    crc: Crc8
    lines: list[Crc8]
    count: SeqInt
    source: str | None = None
    sha256: list[Sha256Hex] | None = None


class BranchOrigin(msgspec.Struct, frozen=True):
    """Where a recorded line was first written: its seq and crc member in that version."""

    seq: SeqInt
    crc: Crc8


class BranchEventData(msgspec.Struct):
    """``branch/event``: one line of another version, recorded, not applied: ``line`` is its
    JSON object as written (without its newline), ``branch`` the seq of its ``branch/start``,
    ``origin`` the recorded line's own seq and crc member."""

    branch: SeqInt
    origin: BranchOrigin
    line: dict[str, Any]


class SessionTitleData(msgspec.Struct):
    """``session/title`` (1.1): a title for people given after the header was written; the
    latest one wins over the header's ``title``."""

    title: str


CORE_TYPES: dict[str, type[msgspec.Struct]] = {
    "session/start": HeaderData,
    "session/flush": FlushData,
    "session/title": SessionTitleData,
    "turn/start": TurnStartData,
    "turn/end": TurnEndData,
    "step/start": StepStartData,
    "step/end": StepEndData,
    "user/message": UserMessageData,
    "assistant/message": AssistantMessageData,
    "assistant/chunk": AnyData,
    "tool/call": ToolCallData,
    "tool/result": ToolResultData,
    "todo/write": TodoWriteData,
    "request/header": RequestHeaderData,
    "surface/retract": RetractData,
    "compaction/start": CompactionStartData,
    "compaction/summary": CompactionSummaryData,
    "compaction/end": CompactionEndData,
    "compaction/prune": CompactionPruneData,
    "handoff/anchor": HandoffData,
    "fork/merge": ForkMergeData,
    "fork/discard": ForkDiscardData,
    "branch/start": BranchStartData,
    "branch/event": BranchEventData,
}

#: Types whose events form the model-visible surface.
SURFACE_TYPES = frozenset({"user/message", "assistant/message", "tool/result"})
#: Types the writer always marks ``ignorable`` (readers may skip them when folding).
IGNORABLE_TYPES = frozenset(
    {"session/flush", "session/title", "assistant/chunk", "branch/start", "branch/event"}
)

#: The roles the message of each model-visible type may carry (spec §8.2).
MESSAGE_ROLES: dict[str, tuple[str, ...]] = {
    "user/message": ("user", "system"),
    "assistant/message": ("assistant",),
    "tool/result": ("tool",),
}
_TYPE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*(?:/[a-z0-9][a-z0-9._-]*)+$")


def validate_type_name(type_: str) -> None:
    """Event types are namespaced lowercase: ``user/message``, ``com.example/thing``."""
    if not isinstance(type_, str) or _TYPE_NAME.match(type_) is None:
        raise InvalidEventError(
            f"event type {type_!r} is not a namespaced name like 'user/message' "
            "(lowercase letters, digits, '.', '_', '-', separated by '/')",
            field="$.type",
        )


def _convert_error(exc: msgspec.ValidationError, prefix: str) -> InvalidEventError:
    text = str(exc)
    field = prefix
    if " - at `$" in text:
        text, _, at = text.partition(" - at `$")
        field = prefix + at.rstrip("`")
    return InvalidEventError(text, field=field)


def validate_data(type_: str, data: dict[str, Any]) -> msgspec.Struct | None:
    """Check ``data`` of a core type against its shape; return the decoded Struct.

    Unknown types return None (they are allowed; folding decides what to do with them).
    """
    shape = CORE_TYPES.get(type_)
    if shape is None:
        return None
    try:
        decoded = msgspec.convert(data, type=shape)
    except msgspec.ValidationError as exc:
        raise _convert_error(exc, "$.data") from None
    message = getattr(decoded, "message", None)
    if isinstance(message, Message):
        _validate_message(type_, message, decoded)
    return decoded


def _validate_message(type_: str, message: Message, decoded: msgspec.Struct) -> None:
    roles = MESSAGE_ROLES[type_]
    if message.role not in roles:
        raise InvalidEventError(
            f"{type_} carries a message with role {message.role!r}; expected "
            + " or ".join(repr(r) for r in roles),
            field="$.data.message.role",
        )
    for i, part in enumerate(message.parts):
        where = f"$.data.message.parts[{i}]"
        kind = part.get("type")
        if not isinstance(kind, str):
            raise InvalidEventError("content part has no string 'type'", field=where)
        shape = PART_TYPES.get(kind)
        if shape is None:
            continue  # extension part: kept as data, shown generically
        try:
            msgspec.convert(part, type=shape)
        except msgspec.ValidationError as exc:
            raise _convert_error(exc, where) from None
    if type_ == "tool/result":
        call_id = decoded.call_id  # type: ignore[attr-defined]
        responses = [p for p in message.parts if p.get("type") == "tool_call_response"]
        if len(responses) != 1 or responses[0].get("id") != call_id:
            raise InvalidEventError(
                "a tool/result message holds exactly one tool_call_response part whose id "
                f"equals data.call_id ({call_id!r})",
                field="$.data.message.parts",
            )


_OPTIONAL_HEADER = ("minor", "title", "cwd", "agent", "parent", "meta")


def check_header(event: Event, path: str | None = None) -> HeaderData:
    """Validate line 0. Newer major versions are refused before the shape is looked at."""
    if event.seq != 0 or event.type != "session/start":
        raise FormatError(
            "not a jsonltape session: line 1 must be the session/start header with seq 0",
            path=path,
            line=1,
            offset=0,
        )
    if event.data.get("format") != FORMAT:
        raise FormatError(
            'not a jsonltape session: header data.format is not "jsonltape"',
            path=path,
            line=1,
            offset=0,
            field="$.data.format",
        )
    version = event.data.get("version")
    if type(version) is int and version > VERSION:
        raise UnsupportedVersionError(
            f"written by format version {version}; this jsonltape reads version {VERSION} "
            "(upgrade jsonltape)",
            path=path,
            line=1,
            offset=0,
            field="$.data.version",
        )
    if type(version) is not int or version != VERSION:
        raise UnsupportedVersionError(
            f"unsupported format version {version!r}",
            path=path,
            line=1,
            offset=0,
            field="$.data.version",
        )
    parent = event.data.get("parent")
    nulls = [f"$.data.{n}" for n in _OPTIONAL_HEADER if n in event.data and event.data[n] is None]
    if isinstance(parent, dict):
        nulls += [f"$.data.parent.{n}" for n in ("path", "crc") if parent.get(n, 0) is None]
    if nulls:
        raise FormatError(
            f"not a jsonltape session: header {nulls[0][2:]} is null (omit it or give a value)",
            path=path,
            line=1,
            offset=0,
            field=nulls[0],
        )
    try:
        return msgspec.convert(event.data, type=HeaderData)
    except msgspec.ValidationError as exc:
        err = _convert_error(exc, "$.data")
        raise FormatError(
            f"bad header: {err.message}", path=path, line=1, offset=0, field=err.field
        ) from None
