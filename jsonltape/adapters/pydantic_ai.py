"""jsonltape as the message history of a Pydantic AI agent.

Pydantic AI keeps no history itself: a run returns its messages (``result.new_messages()``)
and the next run takes them back as ``message_history``. These helpers put a run's messages in
a session and read the history back as ``ModelMessage`` objects::

    from jsonltape.adapters.pydantic_ai import append_messages, load_messages

    result = agent.run_sync("hello", message_history=load_messages(path, missing_ok=True))
    append_messages(path, result.new_messages())   # durable when it returns

Mapping (one ``turn/start`` … ``turn/end`` per call). Each ``ModelResponse`` is one
``assistant/message``: text → ``text``, thinking → ``reasoning`` (with ``signature``), tool
calls → ``tool_call`` (the call id kept, each also a ``tool/call``), a file → ``blob``, other
parts → a part of type ``x-pydantic-ai/<part_kind>``. A ``ModelRequest`` is split in order:
system prompts → ``user/message`` role ``system``, user prompts (text, images and documents by
URL → ``uri``, binary → ``blob``, uploaded files → ``file``), retry feedback and a summary
the app wrote (``CompactionPart``) → ``user/message`` role ``user``, each tool return (a
failed, denied or retried one with ``is_error``) → ``tool/result``; other parts join the user
message before them, or one of their own. ``instructions`` and the model: a ``request/header``.

Every event keeps, in ``data.pydantic_ai``, the message's own JSON (as the library's
``ModelMessagesTypeAdapter`` dumps it) without its parts, and the parts it holds, verbatim with
their positions. :func:`load_messages` rebuilds each message from the events of it that are
still on the surface, so what it returns is exactly what was appended, minus what was retracted.
Messages written by something else (a compaction summary, another tool) are converted from the
neutral form. Nothing is ever deleted: :func:`retract_last` and :func:`clear` retract.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Literal

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, ModelResponse

from .. import _fs
from .._agent import message_id
from .._gate import explain
from ..errors import FormatError, InvalidArgumentError
from ..fold import fold_file, retract
from ..fold._fold import Node
from ..writer import Tape
from ..writer import open as open_tape
from ._first_write import write

__all__ = ["EXT", "append_messages", "clear", "load_messages", "retract_last"]

#: The data member holding the framework's own JSON of what an event maps.
EXT = "pydantic_ai"
#: A user prompt's content items given by URL, and the spec's ``modality`` of each (§8.2).
_URL_KINDS = {
    "image-url": "image",
    "audio-url": "audio",
    "video-url": "video",
    "document-url": None,
}
#: Request parts the model sees as text; a compaction summary written by the app goes out in the
#: user's voice (a provider's own, opaque one lives in a response).
_MAPPED_REQUEST_PARTS = (
    "system-prompt",
    "user-prompt",
    "retry-feedback",
    "retry-prompt",
    "compaction",
)
_ERROR_OUTCOMES = ("failed", "denied", "interrupted", "retried")
#: Like sqlite3's default busy timeout: a second writer waits this long for the lock.
DEFAULT_LOCK_TIMEOUT = 5.0

Target = str | os.PathLike[str] | Tape


# -- writing --------------------------------------------------------------------------------


def append_messages(
    target: Target,
    messages: Sequence[ModelMessage],
    *,
    title: str | None = None,
    session_id: str | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> int:
    """Append a run's messages (``result.new_messages()``) to a session as one turn.

    ``target`` is a session path (created if missing, with ``title`` and ``session_id``, once
    the messages are written: a call that raises leaves no file) or an open
    :class:`~jsonltape.Tape`. Returns once everything appended is durable (flushed); the
    return value is the durable seq. A second writer waits up to ``lock_timeout`` seconds, then
    fails with :class:`~jsonltape.LockedError`; appends of two writers never interleave.
    """
    _check_messages(messages)
    dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    batch = message_id()
    events = [ev for i, m in enumerate(dumped) for ev in _events(m, f"{batch}.{i}", batch)]
    header = _request_header(dumped)
    if isinstance(target, Tape):
        return _append(target, events, header)
    from pydantic_ai import __version__

    return write(
        _fs.session_path(target),
        lambda tape: _append(tape, events, header),
        title=title,
        session_id=session_id,
        agent=f"pydantic-ai {__version__}",
        lock_timeout=lock_timeout,
    )


def _check_messages(messages: object) -> None:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidArgumentError(
            f"messages must be a list of ModelRequest/ModelResponse (result.new_messages()), "
            f"not {type(messages).__name__}",
            field="messages",
        )
    for i, m in enumerate(messages):
        if not isinstance(m, (ModelRequest, ModelResponse)):
            raise InvalidArgumentError(
                f"messages[{i}] is a {type(m).__name__}, not a ModelRequest or ModelResponse",
                field=f"messages[{i}]",
            )


def _append(tape: Tape, events: list[dict[str, Any]], header: dict[str, Any] | None) -> int:
    if not events:
        return tape.flush()
    with tape.locked():
        if tape.open_turn is not None:  # the caller's own turn holds this run
            _append_run(tape, tape.open_turn, events, header)
        else:
            with tape.turn() as turn:
                _append_run(tape, turn.seq, events, header)
    return tape.flush()


def _append_run(
    tape: Tape, turn: int, events: list[dict[str, Any]], header: dict[str, Any] | None
) -> None:
    if header is not None:
        tape.append("request/header", header)
    for ev in events:
        if ev["type"] == "tool/call":
            ev["data"]["turn"] = turn
    tape.append_batch(events)


def _events(m: dict[str, Any], group: str, batch: str) -> list[dict[str, Any]]:
    """The events of one dumped message: (type, neutral message, the parts it holds)."""
    envelope = {k: v for k, v in m.items() if k != "parts"}
    parts: list[dict[str, Any]] = list(m.get("parts") or [])
    if m.get("kind") == "response":
        return _response_events(m, envelope, parts, group, batch)
    out: list[dict[str, Any]] = []
    open_user: dict[str, Any] | None = None  # the user/message unmapped parts join
    for i, part in enumerate(parts):
        kind = part.get("part_kind")
        # A legacy retry prompt answers a call only when it names the tool.
        answers = kind == "tool-return" or (kind == "retry-prompt" and part.get("tool_name"))
        if answers and isinstance(part.get("tool_call_id"), str):
            out.append(_tool_result(part, i, envelope, group, batch))
            open_user = None
            continue
        mapped = kind in _MAPPED_REQUEST_PARTS
        if mapped or open_user is None:  # an unmapped part joins the message before it
            role = "system" if kind == "system-prompt" else "user"
            open_user = _event("user/message", role, envelope, group, batch)
            out.append(open_user)
        open_user["data"]["message"]["parts"].extend(_request_part(part))
        _hold(open_user, i, part)
    if not out:  # no parts at all (an interrupted request): still one node, invisible to models
        out.append(_event("user/message", "user", envelope, group, batch))
    return out


def _event(
    type_: str, role: str, envelope: dict[str, Any], group: str, batch: str
) -> dict[str, Any]:
    message = {"id": message_id(), "role": role, "parts": []}
    ext = {"batch": batch, "group": group, "message": envelope, "at": [], "parts": []}
    return {"type": type_, "data": {"message": message, EXT: ext}}


def _hold(event: dict[str, Any], index: int, part: dict[str, Any]) -> None:
    ext = event["data"][EXT]
    ext["at"].append(index)
    ext["parts"].append(part)


def _tool_result(
    part: dict[str, Any], i: int, envelope: dict[str, Any], group: str, batch: str
) -> dict[str, Any]:
    call_id = part["tool_call_id"]
    ev = _event("tool/result", "tool", envelope, group, batch)
    response: dict[str, Any] = {"type": "tool_call_response", "id": call_id}
    response["response"] = part.get("content")
    if part.get("part_kind") == "retry-prompt" or part.get("outcome") in _ERROR_OUTCOMES:
        response["is_error"] = True
    ev["data"]["message"]["parts"].append(response)
    ev["data"]["call_id"] = call_id
    _hold(ev, i, part)
    return ev


def _request_part(part: dict[str, Any]) -> list[dict[str, Any]]:
    """The neutral parts of one request part (a user prompt may hold several)."""
    kind = part.get("part_kind")
    content = part.get("content")
    if kind == "user-prompt":
        items = content if isinstance(content, list) else [content]
        return [p for p in (_content_item(c) for c in items) if p is not None]
    if kind in _MAPPED_REQUEST_PARTS and isinstance(content, str):
        return [{"type": "text", "content": content}]
    if kind in ("retry-feedback", "retry-prompt"):  # validation errors: a list of objects
        return [{"type": "text", "content": json.dumps(content, ensure_ascii=False)}]
    return [{"type": f"x-pydantic-ai/{kind}"}]


def _content_item(item: Any) -> dict[str, Any] | None:
    if isinstance(item, str):
        return {"type": "text", "content": item}
    if not isinstance(item, dict):
        return None
    kind = item.get("kind")
    mime = item.get("media_type")
    if kind in _URL_KINDS and isinstance(item.get("url"), str):
        part: dict[str, Any] = {"type": "uri", "uri": item["url"]}
    elif kind == "binary" and isinstance(item.get("data"), str) and isinstance(mime, str):
        part = {"type": "blob", "content": item["data"]}
    elif kind == "uploaded-file" and isinstance(item.get("file_id"), str):
        part = {"type": "file", "file_id": item["file_id"]}
    elif kind in ("text-content", "structured-content") and isinstance(item.get("content"), str):
        return {"type": "text", "content": item["content"]}
    elif kind == "cache-point":
        return None  # a provider hint, not content
    else:
        return {"type": f"x-pydantic-ai/{kind}"}
    if isinstance(mime, str):
        part["mime_type"] = mime
        modality = _URL_KINDS.get(str(kind)) or mime.partition("/")[0]
        if modality in ("image", "audio", "video"):
            part["modality"] = modality
    return part


def _response_events(
    m: dict[str, Any], envelope: dict[str, Any], parts: list[dict[str, Any]], group: str, batch: str
) -> list[dict[str, Any]]:
    ev = _event("assistant/message", "assistant", envelope, group, batch)
    rid = m.get("provider_response_id")
    if isinstance(rid, str) and rid:
        ev["data"]["message"]["id"] = rid
    calls: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        neutral = _response_part(part)
        ev["data"]["message"]["parts"].append(neutral)
        _hold(ev, i, part)
        if neutral["type"] == "tool_call":
            call = {"call_id": neutral["id"], "name": neutral["name"]}
            call["arguments"] = neutral["arguments"]
            calls.append({"type": "tool/call", "data": call})
    if isinstance(m.get("model_name"), str):
        ev["data"]["model"] = m["model_name"]
    usage = m.get("usage")
    if isinstance(usage, dict):
        tokens = {k: usage[k] for k in ("input_tokens", "output_tokens") if k in usage}
        if tokens:
            ev["data"]["usage"] = tokens
    return [ev, *calls]


def _response_part(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("part_kind")
    content = part.get("content")
    if kind == "text" and isinstance(content, str):
        return {"type": "text", "content": content}
    if kind == "thinking" and isinstance(content, str):
        out = {"type": "reasoning", "content": content}
        if isinstance(part.get("signature"), str):
            out["signature"] = part["signature"]
        return out
    if kind == "tool-call" and isinstance(part.get("tool_call_id"), str):
        return {
            "type": "tool_call",
            "id": part["tool_call_id"],
            "name": str(part.get("tool_name")),
            "arguments": _arguments(part.get("args")),
        }
    if kind == "file" and isinstance(content, dict) and content.get("kind") == "binary":
        blob = _content_item(content)
        if blob is not None:
            return blob
    out = {"type": f"x-pydantic-ai/{kind}"}
    if isinstance(part.get("tool_name"), str):
        out["name"] = part["tool_name"]
    return out


def _arguments(args: Any) -> Any:
    """Arguments as the spec has them: an object when the model produced valid JSON."""
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except ValueError:
            return args
        # Only an object that survives jsonltape's lossless gate; else the raw text is exact.
        return parsed if isinstance(parsed, dict) and explain(parsed) is None else args
    return args if args is not None else {}


def _request_header(dumped: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The latest instructions and model of the run, as a ``request/header`` (latest wins)."""
    header: dict[str, Any] = {}
    for m in dumped:
        if m.get("kind") == "request":
            if isinstance(m.get("instructions"), str):
                header["system"] = m["instructions"]
            else:
                header.pop("system", None)
        elif isinstance(m.get("model_name"), str):
            header["model"] = m["model_name"]
    return header or None


# -- reading --------------------------------------------------------------------------------


def load_messages(path: str | os.PathLike[str], *, missing_ok: bool = False) -> list[ModelMessage]:
    """The message history of a session, for ``agent.run(..., message_history=...)``.

    It is the fold's current surface (retracted and compacted messages are left out), as the
    library's ``ModelMessagesTypeAdapter`` validates it. ``missing_ok`` returns ``[]`` for a
    session that does not exist yet (a first run) instead of raising
    :class:`~jsonltape.SessionNotFoundError`.
    """
    if missing_ok and not os.path.lexists(_fs.session_path(path)):
        return []
    return _validate(path, *_dumps(fold_file(path).current()))


def _dumps(nodes: list[Node]) -> tuple[list[dict[str, Any]], list[Node]]:
    """Each message of ``nodes`` as ``ModelMessagesTypeAdapter`` JSON, in surface order, and
    the node each one starts at (to name it in an error)."""
    out: list[dict[str, Any]] = []
    first: list[Node] = []
    groups: dict[str, tuple[dict[str, Any], list[tuple[int, Any]]]] = {}
    calls: dict[str, str] = {}  # tool call id -> tool name, for results written by others
    for node in nodes:
        data = json.loads(node.data)
        ext = data.get(EXT)
        if isinstance(ext, dict) and isinstance(ext.get("group"), str):
            gid = ext["group"]
            if gid not in groups:
                message = dict(ext.get("message") or {})
                groups[gid] = (message, [])
                out.append(message)
                first.append(node)
            groups[gid][1].extend(zip(ext.get("at") or [], ext.get("parts") or [], strict=False))
        else:
            out.append(_foreign(node.type, data, calls))
            first.append(node)
        for part in data.get("message", {}).get("parts", []):
            if isinstance(part, dict) and part.get("type") == "tool_call":
                calls[str(part.get("id"))] = str(part.get("name"))
    for message, held in groups.values():
        message["parts"] = [part for _i, part in sorted(held, key=lambda h: h[0])]
    return out, first


def _foreign(type_: str, data: dict[str, Any], calls: dict[str, str]) -> dict[str, Any]:
    """A message jsonltape (or another tool) wrote, in Pydantic AI's shape."""
    message = data.get("message", {})
    parts = [p for p in message.get("parts", []) if isinstance(p, dict)]
    if type_ == "tool/result":
        call_id = str(data.get("call_id"))
        resp = next((p for p in parts if p.get("type") == "tool_call_response"), {})
        part = {
            "part_kind": "tool-return",
            "tool_name": calls.get(call_id, ""),
            "content": resp.get("response"),
            "tool_call_id": call_id,
        }
        if resp.get("is_error"):
            part["outcome"] = "failed"
        return {"kind": "request", "parts": [part]}
    if type_ == "assistant/message":
        out: list[dict[str, Any]] = []
        for p in parts:
            if p.get("type") == "text":
                out.append({"part_kind": "text", "content": p.get("content", "")})
            elif p.get("type") == "reasoning":
                thinking = {"part_kind": "thinking", "content": p.get("content", "")}
                if isinstance(p.get("signature"), str):
                    thinking["signature"] = p["signature"]
                out.append(thinking)
            elif p.get("type") == "tool_call":
                args = p.get("arguments")
                out.append(
                    {
                        "part_kind": "tool-call",
                        "tool_name": p.get("name"),
                        "args": args if isinstance(args, (dict, str)) else json.dumps(args),
                        "tool_call_id": p.get("id"),
                    }
                )
        response: dict[str, Any] = {"kind": "response", "parts": out}
        if isinstance(data.get("model"), str):
            response["model_name"] = data["model"]
        return response
    if message.get("role") == "system":
        text = "\n".join(str(p.get("content", "")) for p in parts if p.get("type") == "text")
        return {"kind": "request", "parts": [{"part_kind": "system-prompt", "content": text}]}
    content: list[Any] = []
    for p in parts:
        if p.get("type") == "text":
            content.append(p.get("content", ""))
        elif p.get("type") == "uri":
            kind = {"image": "image-url", "audio": "audio-url", "video": "video-url"}
            content.append(
                {"kind": kind.get(p.get("modality", ""), "document-url"), "url": p["uri"]}
            )
        elif p.get("type") == "blob":
            content.append({"kind": "binary", "data": p["content"], "media_type": p["mime_type"]})
    prompt: Any = content[0] if len(content) == 1 and isinstance(content[0], str) else content
    return {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": prompt}]}


def _validate(
    path: str | os.PathLike[str], dumped: list[dict[str, Any]], nodes: list[Node]
) -> list[ModelMessage]:
    # validate_json, not validate_python: bytes are base64 in JSON only (the adapter's config).
    import pydantic

    try:
        return ModelMessagesTypeAdapter.validate_json(json.dumps(dumped))
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        loc = list(first["loc"])
        index = loc.pop(0) if loc and isinstance(loc[0], int) else None
        node = nodes[index] if isinstance(index, int) else None
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)
        raise FormatError(
            f"not a Pydantic AI message ({first['msg']} at {where or 'the message'}); "
            f"the event's data.{EXT} is damaged",
            path=_fs.session_path(path),
            line=None if node is None else node.seq + 1,
            offset=None if node is None else node.offset,
            field=f"$.data.{EXT}",
        ) from None


# -- retracting -----------------------------------------------------------------------------


def retract_last(
    path: str | os.PathLike[str], *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT
) -> list[ModelMessage]:
    """Take the last appended run off the history and return its messages.

    Retracts (``surface/retract``, reason ``pydantic_ai:retract_last``) every message from the
    first one of the latest :func:`append_messages` still on the surface through the end of the
    surface; nothing is removed from the file. Returns ``[]`` when no appended run is left. The
    fold refuses (:class:`~jsonltape.FoldError`) a run that opens with the result of a call made
    by an earlier run (a deferred tool call), since that would leave the call unanswered.
    """
    return _retract(path, lock_timeout, "last")


def clear(path: str | os.PathLike[str], *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> None:
    """Retract the whole history (reason ``pydantic_ai:clear``); the file keeps everything."""
    _retract(path, lock_timeout, "all")


def _retract(
    path: str | os.PathLike[str], lock_timeout: float, what: Literal["last", "all"]
) -> list[ModelMessage]:
    # The tape is held from the fold to the retraction: no other writer can move the surface.
    with open_tape(path, durability="manual", lock_timeout=lock_timeout) as tape:
        tape.drain()
        nodes = fold_file(tape.path).own_nodes()
        start = 0 if nodes else None
        if what == "last":
            start = _last_batch_start(nodes)
        if start is None:
            return []
        taken = nodes[start:]
        retract(
            tape,
            taken[0].seq,
            taken[-1].seq,
            reason=f"{EXT}:{'retract_last' if what == 'last' else 'clear'}",
        )
        tape.flush()
    return _validate(path, *_dumps(taken)) if what == "last" else []


def _last_batch_start(nodes: list[Node]) -> int | None:
    batch: str | None = None
    start: int | None = None
    for i in range(len(nodes) - 1, -1, -1):
        ext = json.loads(nodes[i].data).get(EXT)
        this = ext.get("batch") if isinstance(ext, dict) else None
        if batch is None and this is not None:
            batch = this
        if batch is not None:
            if this != batch:
                break
            start = i
    return start
