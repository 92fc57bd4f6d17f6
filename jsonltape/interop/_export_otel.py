"""``export --format otel``: a session as an OpenTelemetry trace in the GenAI semantic
conventions (semconv 1.44 ``docs/gen-ai/gen-ai-spans.md``, ``gen-ai-agent-spans.md``), as OTLP
JSON Lines: one ``ExportTraceServiceRequest`` a line, a span each (what a collector's OTLP
JSON file receiver reads; each line is a body ``/v1/traces`` takes), written as each span
finishes, so the trace (which grows with calls times history) is never held whole.

One trace per session, its spans:

* the session: the root span (``INTERNAL``, written last), with ``gen_ai.conversation.id``; a
  fork or a sub-agent links to its parent's root span, a sub-agent a tool call spawned also
  to that call's ``execute_tool`` span (span links, attribute ``jsonltape.link``);
* each turn: an ``invoke_agent`` span (``INTERNAL``) from its ``turn/start`` to its
  ``turn/end``; an ``error`` end sets the status ERROR;
* each model response (an ``assistant/message`` the transcript shows: current or compacted):
  a ``chat`` inference span (``CLIENT``) under its turn, with ``gen_ai.input.messages`` (the
  model-visible history before the response, exactly what ``messages --at`` folds: a
  compaction shows as the summary the model then read), ``gen_ai.output.messages`` (the
  response with a ``finish_reason``), ``gen_ai.system_instructions``, the request's and the
  response's model, ``gen_ai.response.id`` and ``gen_ai.usage.*`` (input tokens counting cached
  ones, as the conventions say); it starts at the newest message it read and ends at its own
  time;
* each tool call of such a response: an ``execute_tool`` span (``INTERNAL``) from its
  ``tool/call`` (else the response) to its result, with ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``.arguments`` and ``.result`` (an error result sets the status
  ERROR and ``error.type``).

Messages keep jsonltape's parts, which are the conventions' parts (spec §12); a ``blob``,
``uri`` or ``file`` part gets the ``modality`` the schemas require from its type. Structured
values are JSON text in string attributes (the conventions' rule for spans). Ids are derived
from the session id (trace), and the seq or tool call id of what a span stands for (span), so
two exports of a session are byte-identical and a child can link to its parent's spans without
reading it. Times are the source's own for imported sessions, as nanosecond strings.

What the trace cannot carry is counted (``jsonltape.dropped`` on the root span, and the note
``export`` prints): earlier versions of revised messages, retracted messages and the spans
their calls would have made, compaction and prune records (their effect is in later
``gen_ai.input.messages``), messages no model call read, todo lists, branch records.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .. import fold
from ..events import Event, HeaderData
from ._export_trace import (
    Dropped,
    agent_name,
    event_time,
    image_type,
    import_info,
    import_source,
    tokens,
)
from .redaction import Redactor

__all__ = ["otel", "span_id", "trace_id"]

_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()
_INTERNAL, _CLIENT = 1, 3  # SpanKind: SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT
_ERROR = 2  # StatusCode: STATUS_CODE_ERROR
_PROVIDERS = {"claude-code": "anthropic", "codex": "openai", "gemini-cli": "gcp.gemini"}
_FINISH = {"end_turn": "stop", "stop": "stop", "stop_sequence": "stop", "max_tokens": "length"}
_FINISH |= {"length": "length", "tool_use": "tool_call", "tool_calls": "tool_call"}
_FINISH |= {"toolUse": "tool_call", "error": "error", "content_filter": "content_filter"}
_MODALITIES = ("image", "video", "audio")


def trace_id(session: str) -> str:
    """The trace of a session: 16 bytes of SHA-256 over its id, as 32 hex digits."""
    return _nonzero(hashlib.sha256(b"jsonltape trace\0" + session.encode()).digest()[:16])


def span_id(session: str, key: str) -> str:
    """A span of a session: 8 bytes of SHA-256 over the session id and the span's key
    (``session``, ``turn/<seq>``, ``chat/<seq>``, ``tool/<call id>[/<n>]``), as 16 hex digits."""
    digest = hashlib.sha256(b"jsonltape span\0" + session.encode() + b"\0" + key.encode())
    return _nonzero(digest.digest()[:8])


def _nonzero(raw: bytes) -> str:
    # OTLP reads an all-zero id as "no id"; one in 2**64 digests would be.
    return (raw if any(raw) else raw[:-1] + b"\x01").hex()


def _attr(key: str, value: Any) -> dict[str, Any]:
    """An OTLP ``KeyValue``: bools, ints (as decimal strings, the JSON of int64), floats,
    strings, string lists; anything else as its JSON text."""
    if isinstance(value, bool):
        v: dict[str, Any] = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": str(value)}
    elif isinstance(value, float):
        v = {"doubleValue": value}
    elif isinstance(value, str):
        v = {"stringValue": value}
    elif isinstance(value, _Raw):
        v = {"stringValue": value.json.decode()}
    elif isinstance(value, list) and all(isinstance(x, str) for x in value):
        v = {"arrayValue": {"values": [{"stringValue": x} for x in value]}}
    else:
        v = {"stringValue": fold.compact_json(value)}
    return {"key": key, "value": v}


@dataclass
class _Span:
    key: str
    name: str
    kind: int
    start: int
    end: int
    parent: str | None
    attrs: list[tuple[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def encode(self, trace: str, session: str) -> dict[str, Any]:
        out: dict[str, Any] = {"traceId": trace, "spanId": span_id(session, self.key)}
        if self.parent is not None:
            out["parentSpanId"] = span_id(session, self.parent)
        out["name"] = self.name
        out["kind"] = self.kind
        out["startTimeUnixNano"] = str(self.start * 1_000_000)
        out["endTimeUnixNano"] = str(max(self.end, self.start) * 1_000_000)
        out["attributes"] = [_attr(k, v) for k, v in self.attrs if v is not None]
        if self.links:
            out["links"] = self.links
        if self.error is not None:
            out["status"] = {"code": _ERROR, "message": self.error}
        return out


def _modality(part: dict[str, Any]) -> str:
    """The conventions' modality of a media part: its own, else its MIME type's major type
    (``image``/``video``/``audio``), else that type whole (the schemas take any string)."""
    own = part.get("modality")
    if isinstance(own, str) and own:
        return own
    if image_type(part) is not None:
        return "image"
    mime = part.get("mime_type")
    if isinstance(mime, str) and mime:
        major = mime.split("/", 1)[0].lower()
        return major if major in _MODALITIES else mime
    return "unknown"


def _message(message: dict[str, Any]) -> dict[str, Any]:
    """A logged message in the conventions' ``ChatMessage`` shape (role, parts, name)."""
    parts = []
    for p in message.get("parts") or ():
        if not isinstance(p, dict):
            continue
        if p.get("type") in ("blob", "uri", "file") and not isinstance(p.get("modality"), str):
            p = {**p, "modality": _modality(p)}
        parts.append(p)
    out: dict[str, Any] = {"role": message.get("role"), "parts": parts}
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    return out


def _finish(data: dict[str, Any], message: dict[str, Any]) -> str:
    info = data.get("import")
    stop = info.get("stop_reason") if isinstance(info, dict) else None
    if isinstance(stop, str) and stop in _FINISH:
        return _FINISH[stop]
    calls = any(isinstance(p, dict) and p.get("type") == "tool_call" for p in message["parts"])
    return "tool_call" if calls else "stop"


@dataclass
class _Node:
    """A message the model read: its JSON (in the conventions' shape) and its time."""

    json: bytes
    time: int


class _Trace:
    def __init__(self, red: Redactor, dropped: Dropped) -> None:
        self.red = red
        self.dropped = dropped
        self.session = ""
        self.source: str | None = None
        self.agent = "unknown"
        self.done: list[str] = []  # lines of finished spans, not yet given out
        self.root = _Span("session", "session", _INTERNAL, 0, 0, None)
        self.turn: _Span | None = None
        self.nodes: dict[tuple[str | None, int], _Node] = {}
        self.tools: dict[str, _Span] = {}  # call id -> its open execute_tool span
        self.called: dict[str, int] = {}  # call id -> time of its latest tool/call
        self.uses: dict[str, int] = {}  # call id -> how many spans it named so far
        self.read: set[int] = set()  # seqs of own messages a model call read (or wrote)
        self.last = 0
        self.conv = ""  # the session id as shown (redacted)
        self._header_raw: bytes | None = None
        self._header_now: dict[str, Any] = {}

    def node(self, n: fold.Node) -> _Node:
        key = (n.session, n.seq)
        got = self.nodes.get(key)
        if got is None:
            data = _dec.decode(n.data)
            item = self.red.item({"message": data["message"]})
            raw = _enc.encode(_message(item["message"]))
            if self.red.secrets:  # export_to's second look, one message at a time (see there)
                raw = self.red.text(raw.decode()).encode()
            got = _Node(raw, event_time(data, n.time))
            self.nodes[key] = got
        return got

    def header(self, e: Event) -> None:
        hdr = msgspec.convert(e.data, HeaderData)
        info = import_info(hdr)
        self.session = hdr.id
        self.source = import_source(hdr)
        self.agent = self.red.text(agent_name(hdr.agent)[0])
        self.conv = self.red.text(self.session)
        created = info.get("created")
        self.root.start = self.root.end = created if type(created) is int else hdr.created
        self.root.name = f"session {self.agent}"
        self.root.attrs += [
            ("gen_ai.conversation.id", self.conv),
            ("gen_ai.agent.name", self.agent),
            ("jsonltape.session.title", self.red.text(hdr.title) if hdr.title else None),
            ("jsonltape.session.cwd", self.red.text(hdr.cwd) if hdr.cwd else None),
            ("jsonltape.session.agent", self.red.text(hdr.agent) if hdr.agent else None),
        ]
        if hdr.parent is not None:
            parent = hdr.parent.session
            self._link(parent, "session", "parent", hdr.parent.seq)
            spawned = info.get("spawned_by")
            if isinstance(spawned, str):
                self._link(parent, f"tool/{spawned}", "spawned_by", None)

    def _link(self, session: str, key: str, kind: str, seq: Any) -> None:
        attrs = [_attr("jsonltape.link", kind), _attr("gen_ai.conversation.id", session)]
        if type(seq) is int:
            attrs.append(_attr("jsonltape.parent.seq", seq))
        self.root.links.append(
            {"traceId": trace_id(session), "spanId": span_id(session, key), "attributes": attrs}
        )

    def _header(self, f: fold.SessionFold) -> dict[str, Any]:
        """The request header in force, redacted once each time it changes."""
        raw = f.latest_request()
        if raw != self._header_raw:
            self._header_raw = raw
            self._header_now = self.red.value(f.request_header() or {})
        return self._header_now

    def line(self, span: _Span) -> str:
        """One span as one ``ExportTraceServiceRequest`` on a line of its own (OTLP JSON
        Lines, what a collector's OTLP JSON file receiver reads)."""
        resource = {
            "attributes": [
                _attr("service.name", "jsonltape"),
                _attr("gen_ai.agent.name", self.agent),
            ]
        }
        body = {
            "resourceSpans": [
                {
                    "resource": resource,
                    "scopeSpans": [
                        {
                            "scope": {"name": "jsonltape"},
                            "spans": [span.encode(trace_id(self.session), self.session)],
                        }
                    ],
                }
            ]
        }
        return (_enc.encode(body) + b"\n").decode()

    def parent(self) -> str:
        return self.turn.key if self.turn is not None else "session"

    def event(self, e: Event, f: fold.SessionFold, shown: set[int]) -> None:
        t = event_time(e.data, e.time)
        self.last = max(self.last, t)
        kind = e.type
        if kind == "turn/start":
            self._close_turn(t, "interrupted")  # turns do not nest (spec §8.1)
            self.turn = _Span(
                f"turn/{e.seq}", f"invoke_agent {self.agent}", _INTERNAL, t, t, "session"
            )
            self.turn.attrs += [
                ("gen_ai.operation.name", "invoke_agent"),
                ("gen_ai.agent.name", self.agent),
                ("gen_ai.conversation.id", self.conv),
            ]
        elif kind == "turn/end":
            reason = e.data.get("reason")
            error = e.data.get("error")
            self._close_turn(t, reason if isinstance(reason, str) else None, error)
        elif kind == "tool/call" and isinstance(e.data.get("call_id"), str):
            running = self.tools.get(e.data["call_id"])
            if running is not None:  # logged after the response, as it should (spec §8.3)
                running.start = max(running.start, t)
            else:
                self.called[e.data["call_id"]] = t
        elif kind == "assistant/message" and e.seq in shown:
            self._chat(e, f, t)
        elif kind == "tool/result" and e.seq in shown:
            self._result(e, f, t)

    def _close_turn(self, t: int, reason: str | None, error: Any = None) -> None:
        turn = self.turn
        if turn is None:
            return
        turn.end = t
        turn.attrs.append(("jsonltape.turn.reason", reason))
        if reason == "error":
            message = error.get("message") if isinstance(error, dict) else None
            code = error.get("code") if isinstance(error, dict) else None
            turn.attrs.append(
                ("error.type", self.red.text(code) if isinstance(code, str) else "_OTHER")
            )
            turn.error = self.red.text(message) if isinstance(message, str) else "error"
        self.done.append(self.line(turn))
        self.turn = None

    def _chat(self, e: Event, f: fold.SessionFold, t: int) -> None:
        nodes = f.current()
        at = next(
            (
                i
                for i in range(len(nodes) - 1, -1, -1)
                if nodes[i].session is None and nodes[i].seq == e.seq
            ),
            None,
        )
        if at is None:  # pragma: no cover - a shown message is current when it is written
            return
        inputs = [self.node(n) for n in nodes[:at]]
        self.read.update(n.seq for n in nodes[: at + 1] if n.session is None)
        me = self.node(nodes[at])
        out = _dec.decode(me.json)
        data = e.data
        out["finish_reason"] = _finish(data, out)
        header = self._header(f)
        model = data.get("model") if isinstance(data.get("model"), str) else None
        request_model = header.get("model") if isinstance(header.get("model"), str) else model
        start = max((n.time for n in inputs), default=t)
        span = _Span(
            f"chat/{e.seq}",
            f"chat {request_model}" if request_model else "chat",
            _CLIENT,
            min(start, t),
            t,
            self.parent(),
        )
        provider = header.get("provider")
        usage = tokens(data.get("usage"), self.source)
        system = header.get("system")
        message_id = data["message"].get("id")
        span.attrs += [
            ("gen_ai.operation.name", "chat"),
            (
                "gen_ai.provider.name",
                provider
                if isinstance(provider, str)
                else _PROVIDERS.get(self.source or "", "unknown"),
            ),
            ("gen_ai.conversation.id", self.conv),
            ("gen_ai.request.model", request_model),
            ("gen_ai.response.model", model),
            (
                "gen_ai.response.id",
                self.red.text(message_id) if isinstance(message_id, str) else None,
            ),
            ("gen_ai.response.finish_reasons", [out["finish_reason"]]),
        ]
        if usage is not None:
            span.attrs += [
                ("gen_ai.usage.input_tokens", usage.prompt),
                ("gen_ai.usage.output_tokens", usage.completion),
                ("gen_ai.usage.cache_read.input_tokens", usage.cached),
                ("gen_ai.usage.cache_creation.input_tokens", usage.cache_write),
                ("gen_ai.usage.reasoning.output_tokens", usage.reasoning),
            ]
        if isinstance(system, str) and system:
            span.attrs.append(("gen_ai.system_instructions", [{"type": "text", "content": system}]))
        span.attrs.append(
            ("gen_ai.input.messages", _Raw(b"[" + b",".join(n.json for n in inputs) + b"]"))
        )
        span.attrs.append(("gen_ai.output.messages", _Raw(_enc.encode([out]))))
        self.done.append(self.line(span))  # complete: its messages need not be held
        for p in out["parts"]:
            if p.get("type") != "tool_call" or not isinstance(p.get("id"), str):
                continue
            cid = p["id"]
            n = self.uses.get(cid, 0)
            self.uses[cid] = n + 1
            name = p.get("name") if isinstance(p.get("name"), str) else "unknown"
            begin = self.called.pop(cid, t)
            tool = _Span(
                f"tool/{cid}" + (f"/{n}" if n else ""),
                f"execute_tool {name}",
                _INTERNAL,
                max(begin, t),
                t,
                self.parent(),
            )
            tool.attrs += [
                ("gen_ai.operation.name", "execute_tool"),
                ("gen_ai.tool.name", name),
                ("gen_ai.tool.call.id", cid),
                ("gen_ai.tool.type", "function"),
                ("gen_ai.tool.call.arguments", p.get("arguments")),
            ]
            old = self.tools.pop(cid, None)
            if old is not None:  # the same id called again before an answer: that one is done
                self.done.append(self.line(old))
            self.tools[cid] = tool
        # the pruned cache: only what is on the surface can be read again
        keep = {(n.session, n.seq) for n in nodes}
        for key in [k for k in self.nodes if k not in keep]:
            del self.nodes[key]

    def _result(self, e: Event, f: fold.SessionFold, t: int) -> None:
        cid = e.data.get("call_id")
        tool = self.tools.pop(cid, None) if isinstance(cid, str) else None
        if tool is None:
            return  # a second answer (a prune stub, a revision) or an orphan: not a run
        tool.end = t
        self._answer(tool, e, f)
        self.done.append(self.line(tool))

    def _answer(self, tool: _Span, e: Event, f: fold.SessionFold) -> None:
        nodes = f.current()
        mine = next((n for n in reversed(nodes) if n.session is None and n.seq == e.seq), None)
        if mine is None:  # pragma: no cover - a shown result is current when it is written
            return
        message = _dec.decode(self.node(mine).json)
        error = e.data.get("error")
        response: Any = None
        is_error = bool(error)
        for p in message["parts"]:
            if p.get("type") == "tool_call_response":
                response = p.get("response")
                is_error = is_error or p.get("is_error") is True
                break
        if not is_error:
            tool.attrs.append(("gen_ai.tool.call.result", response))
            return
        error = self.red.item({"error": error})["error"] if isinstance(error, dict) else {}
        code = error.get("code")
        tool.attrs.append(("error.type", code if isinstance(code, str) else "_OTHER"))
        text = error.get("message")
        if not isinstance(text, str):
            text = response if isinstance(response, str) else fold.compact_json(response)
        tool.error = text

    def finish(self, shown: set[int]) -> None:
        self._close_turn(self.last, "open")
        self.root.end = max(self.last, self.root.start)
        self.dropped.add("messages no model call read", len(shown - self.read))
        self.dropped.add("tool calls without a result", len(self.tools))
        self.done += [self.line(tool) for tool in self.tools.values()]
        self.tools.clear()


class _Raw:
    """JSON text already encoded (a messages attribute), written as the string it is."""

    __slots__ = ("json",)

    def __init__(self, json: bytes) -> None:
        self.json = json


_KIND_WORDS = (
    ("compaction/summary", "compaction records"),
    ("compaction/prune", "prune records"),
    ("todo/write", "todo lists"),
    ("branch/start", "branches recorded by a git merge"),
)


def otel(
    path: str | os.PathLike[str],
    red: Redactor,
    *,
    parents: dict[str, str | os.PathLike[str]] | None = None,
) -> Generator[str, None, Dropped]:
    """The OTLP JSON Lines trace of the session at ``path``, a line (one span) at a time as
    the spans finish (the session's root span last); returns what it could not carry."""
    dropped = Dropped()
    shown = set()
    hidden = {"superseded": 0, "retracted": 0}
    for v in fold.fold_file(path, versions=True, parents=parents).versions():
        if v.node.session is not None:
            continue
        if v.status in hidden:
            hidden[v.status] += 1
        else:
            shown.add(v.node.seq)
    dropped.add("earlier versions of revised messages", hidden["superseded"])
    dropped.add("retracted messages (abandoned branches)", hidden["retracted"])
    trace = _Trace(red, dropped)
    kinds: dict[str, int] = {}
    for e, f in fold.walk(path, parents=parents):
        kinds[e.type] = kinds.get(e.type, 0) + 1
        if e.seq == 0:
            trace.header(e)
            continue
        trace.event(e, f, shown)
        yield from trace.done
        trace.done.clear()
    trace.finish(shown)
    for kind, words in _KIND_WORDS:
        dropped.add(words, kinds.get(kind, 0))
    if dropped.counts:
        trace.root.attrs.append(("jsonltape.dropped", dropped.as_dict()))
    yield from trace.done
    yield trace.line(trace.root)
    return dropped
