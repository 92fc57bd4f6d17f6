"""GitHub Copilot Chat sessions of VS Code (``<User>/workspaceStorage/<id>/chatSessions/
<session id>.jsonl``, before VS Code 1.109 ``.json``) to jsonltape.

The writer is VS Code itself (microsoft/vscode ``src/vs/workbench/contrib/chat/common/model/``
at commit 047238f9fe1b: ``chatSessionStore.ts``, ``chatSessionOperationLog.ts``,
``objectMutationLog.ts``, ``chatModel.ts``); the Copilot extension (microsoft/vscode-copilot-chat
@ 31acd00a8642) fills each request's ``result.metadata``. A session is one document
``{version: 3, sessionId, creationDate, customTitle?, initialLocation, responderUsername,
requests: [...], inputState?, hasPendingEdits?, ...}``, kept either whole (``.json``, rewritten
on every save) or as an operation log (``.jsonl``: ``{kind: 0, v}`` the whole state, then
``{kind: 1, k: path, v}`` set, ``{kind: 2, k: path, v?, i?}`` push (cut the array at ``i``
first), ``{kind: 3, k: path}`` delete, replayed as ``ObjectMutationLog.read`` does; VS Code
rewrites it whole after 1,024 entries). VS Code reads ``.jsonl`` first, so a ``.json`` beside
one is skipped. Empty windows keep theirs in ``<User>/globalStorage/emptyWindowChatSessions``.

A session is read as records (:func:`unit`): ``{sessionId, creationDate, initialLocation,
workspaceFolder?}`` (the folder from ``workspace.json`` beside ``chatSessions``), each request
as stored, then ``{"$set": {...}}`` with every other member of the document (title, input box,
dates). The last request is held back until it is finished (``modelState.value`` complete,
cancelled or failed) or the file is settled. The title is ``customTitle``, else the first
prompt; a request VS Code rewrote (an edited prompt, a late vote) is imported as a rewrite
(:mod:`._rewrite`) from that request.

Mapping, per request (one turn), as the extension renders history (``agentIntent.ts``,
``summarizedConversationHistory.tsx``):

* the prompt: ``result.metadata.renderedUserMessage`` (the user message "exactly as it must be
  rendered in history": text parts, images), else ``message.text``;
* agent mode, ``result.metadata.toolCallRounds``: one ``assistant/message`` per round
  (``thinking.text`` as reasoning, ``response`` as text, a ``tool_call`` per ``toolCalls[]``,
  ``arguments`` decoded when a JSON object text), each followed by the ``tool/result`` of its
  calls from ``toolCallResults`` (the text of its ``content`` items: a ``value`` string, or the
  text nodes of a prompt-tsx ``value``); a ``summaries``/``summary`` entry for a round is a
  compaction of everything through that round, its message framed as the extension sends it
  (``<conversation-summary>``);
* otherwise the ``response`` items (but for a request of agent mode, ``agent.id``
  ``….editsAgent`` or ``modeInfo.kind`` ``agent``, cut short: agent mode sends back its rounds
  only, and such a request has none): ``thinking`` as reasoning,
  Markdown (``{value}``, older ``markdownContent``) as text, in one ``assistant/message``; tool
  invocations without their round data are display only (kept in the record);
* the last message carries ``model`` (``resolvedModel``, else ``modelId``) and ``usage``
  (``promptTokens`` → ``input_tokens``, ``outputTokens`` → ``output_tokens``: per request, with
  the cache), its id the request's ``responseId``;
* the turn ends as ``modelState`` says (complete, cancelled → ``aborted``, failed → ``error``
  with ``result.errorDetails``); older requests without it: ``isCanceled``, else completed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from ..errors import FormatError
from ._agent import PLATFORMS, Agent, Home, split_take
from ._base import Mapper, Out
from ._document import NOFOLLOW, read_document, render_records
from ._parts import data_url, json_arguments, reasoning_part, text_part, tool_call_part
from ._source import MAX_DEPTH, Unit, parse_time, path_of_uri, too_deep

__all__ = ["AGENTS", "CopilotVscodeMapper", "replay", "take", "units"]

#: Where VS Code keeps chat sessions (a workspace's, an empty window's, one moving windows).
FOLDERS = frozenset({"chatSessions", "emptyWindowChatSessions", "transferredChatSessions"})
#: ``ResponseModelState``: 0 pending, 1 complete, 2 cancelled, 3 failed, 4 needs input.
_DONE = {1: "completed", 2: "aborted", 3: "error"}
_FIRST = ("sessionId", "creationDate", "initialLocation")
_WHAT = "VS Code chat session"


# -- layout ---------------------------------------------------------------------------------


def take(path: Path) -> bool | str:
    """A session file of a chat sessions folder; a ``.json`` beside its ``.jsonl`` is not."""
    if path.parent.name not in FOLDERS or path.suffix not in (".json", ".jsonl"):
        return False
    if path.suffix == ".json" and path.with_name(path.name + "l").exists():
        return f"VS Code reads {path.name}l instead, which is imported"
    return True


def units(path: Path) -> list[Unit] | None:
    """A chat session file as a unit (none for another file); None for a directory, which is
    walked."""
    if path.is_dir():
        return None
    if path.suffix not in (".json", ".jsonl"):
        return []
    return [unit(path)]


# -- the operation log ----------------------------------------------------------------------


class _Bad(Exception):
    """An entry the log cannot apply (the message says why)."""


def _container(state: Any, path: list[Any]) -> Any:
    """What holds the last member of ``path`` (JavaScript's ``current = current[path[i]]``)."""
    current = state
    for k in path[:-1]:
        current = _get(current, k)
    if not isinstance(current, (dict, list)):
        raise _Bad(f"no object at {path[:-1]!r}")
    return current


def _get(container: Any, k: Any) -> Any:
    if isinstance(container, dict):
        return container.get(str(k) if not isinstance(k, str) else k)
    if isinstance(container, list) and type(k) is int and 0 <= k < len(container):
        return container[k]
    raise _Bad(f"no member {k!r}")


def _set(container: Any, k: Any, value: Any, *, delete: bool = False) -> None:
    if isinstance(container, dict):
        key = k if isinstance(k, str) else str(k)
        if delete:
            container.pop(key, None)
        else:
            container[key] = value
        return
    if type(k) is not int or k < 0:
        raise _Bad(f"{k!r} is not an index")
    if k > len(container):  # VS Code's diff sets members that exist (or the next one)
        raise _Bad(f"index {k} is past the end of an array of {len(container)}")
    if k == len(container):
        container.append(None)
    container[k] = None if delete else value


def _apply(state: Any, entry: Any) -> Any:
    """``ObjectMutationLog.read`` 's step: the state after ``entry``."""
    if not isinstance(entry, dict):
        raise _Bad("not an object")
    kind = entry.get("kind")
    if kind == 0:
        return entry.get("v")
    if state is None:
        raise _Bad("the log does not start with its initial state (kind 0)")
    path = entry.get("k")
    if not isinstance(path, list):
        raise _Bad("no path k")
    if kind in (1, 3):
        if path:  # the root is never replaced by a set (VS Code's _applySet)
            _set(_container(state, path), path[-1], entry.get("v"), delete=kind == 3)
        return state
    if kind == 2:
        if not path:
            raise _Bad("a push without a path")
        holder = _container(state, path)
        try:
            arr = _get(holder, path[-1])
        except _Bad:
            arr = None  # JavaScript's ``current[arrayKey] || []``
        if not isinstance(arr, list):
            arr = []
            _set(holder, path[-1], arr)
        cut = entry.get("i")
        if cut is not None:
            if type(cut) is not int or cut < 0 or cut > len(arr):
                raise _Bad(f"i {cut!r} is not an index of an array of {len(arr)}")
            del arr[cut:]
        values = entry.get("v")
        if isinstance(values, list):
            arr.extend(values)  # in place: a response streamed as many pushes stays linear
        return state
    raise _Bad(f"unknown kind {kind!r}")


def replay(path: Path) -> Any:
    """The document a ``.jsonl`` operation log holds; one :class:`FormatError` naming the line
    when an entry is not JSON or cannot be applied. An unfinished last line (no newline, not
    JSON yet) is not read, as VS Code only counts an entry once it is written."""
    fd = os.open(path, NOFOLLOW)
    with open(fd, "rb") as f:
        data = f.read()
    state: Any = None
    lines = data.split(b"\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        last = n == len(lines)
        try:
            deep = too_deep(line)
            if deep is not None:
                raise _Bad(deep)
            try:
                entry = msgspec.json.decode(line)
            except msgspec.DecodeError as exc:
                if last:
                    break  # still being written
                raise _Bad(f"not JSON ({exc})") from None
            state = _apply(state, entry)
        except _Bad as exc:
            raise FormatError(
                f"not a {_WHAT} log: line {n}: {exc}; nothing of this session is imported",
                path=path,
            ) from None
    if not isinstance(state, dict):
        raise FormatError(f"not a {_WHAT}: the log holds no session", path=path)
    if _deeper(state, MAX_DEPTH):
        # sets at deep paths nest a document deeper than any line of the log (B.1's limit)
        raise FormatError(
            f"not a {_WHAT}: the log builds a session nesting deeper than {MAX_DEPTH} levels; "
            "nothing of this session is imported",
            path=path,
        )
    return state


def _deeper(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and dicts more than ``limit`` deep (walked without
    recursion, stopping at the first place that does)."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        node, depth = todo.pop()
        children = node.values() if isinstance(node, dict) else node
        if depth > limit:
            return True
        todo.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


# -- the unit -------------------------------------------------------------------------------


def _document(path: Path) -> dict[str, Any]:
    value = replay(path) if path.suffix == ".jsonl" else read_document(path, _WHAT, "session")
    if not isinstance(value, dict) or not isinstance(value.get("requests"), list):
        raise FormatError(f"not a {_WHAT}: not an object with requests", path=path)
    return value


def _folder(path: Path) -> str | None:
    """The workspace folder of a ``chatSessions`` folder (``workspace.json`` beside it)."""
    try:
        fd = os.open(path.parent.parent / "workspace.json", NOFOLLOW)
        with open(fd, "rb") as f:
            value = msgspec.json.decode(f.read(1 << 16))
    except (OSError, msgspec.DecodeError):
        return None
    if not isinstance(value, dict):
        return None
    folder = value.get("folder", value.get("workspace"))
    return folder if isinstance(folder, str) else None


def _finished(request: Any) -> bool:
    state = request.get("modelState") if isinstance(request, dict) else None
    return isinstance(state, dict) and state.get("value") in _DONE


def unit(path: Path) -> Unit:
    """A session file as a :class:`Unit` of records (see the module doc)."""
    st = os.stat(path, follow_symlinks=False)
    folder = _folder(path)

    def render(settled: bool) -> tuple[bytes, int]:
        doc = _document(path)
        head = {k: doc[k] for k in _FIRST if k in doc}
        head.setdefault("sessionId", path.stem)
        if folder is not None:
            head["workspaceFolder"] = folder
        requests = doc["requests"]
        rest = {k: v for k, v in doc.items() if k not in _FIRST and k != "requests"}
        held = 1 if not requests or not _finished(requests[-1]) else 0
        held += 1  # the $set: what every save rewrites
        return render_records([head, *requests, {"$set": rest}], held if requests else 1, settled)

    return Unit(str(path), path.name, st.st_size, st.st_mtime_ns, render, lambda: _title(path))


def _title(path: Path) -> str | None:
    """The session's own title (read when the import needs it: an unchanged session's file is
    never read); the render gives the verdict on a file it cannot read."""
    try:
        doc = _document(path)
    except (OSError, FormatError):
        return None
    named = doc.get("customTitle") or doc.get("computedTitle")
    return named if isinstance(named, str) and named.strip() else None


# -- mapping --------------------------------------------------------------------------------


def _texts(value: Any) -> list[str]:
    """The text pieces of a prompt-tsx node tree, in order (a line break where one is said)."""
    out: list[str] = []
    todo = [value]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            todo.extend(reversed(node))
        elif isinstance(node, dict):
            text = node.get("text")
            if isinstance(text, str):
                out.append(("\n" if node.get("lineBreakBefore") is True else "") + text)
            for k in ("node", "children", "value"):
                if k in node:
                    todo.append(node[k])
    return out


def result_text(result: Any) -> str:
    """A ``LanguageModelToolResult`` 's text: its ``content`` items' ``value`` strings, or the
    text nodes of a prompt-tsx value, joined."""
    items = result.get("content") if isinstance(result, dict) else None
    pieces = []
    for item in items if isinstance(items, list) else ():
        value = item.get("value") if isinstance(item, dict) else None
        pieces.append(value if isinstance(value, str) else "".join(_texts(value)))
    return "\n".join(p for p in pieces if p)


def _thinking(value: Any) -> str:
    text = value.get("text") if isinstance(value, dict) else value
    if isinstance(text, list):
        return "".join(t for t in text if isinstance(t, str))
    return text if isinstance(text, str) else ""


def _prompt(request: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    rendered = meta.get("renderedUserMessage")
    parts: list[dict[str, Any]] = []
    for p in rendered if isinstance(rendered, list) else ():
        if not isinstance(p, dict):
            continue
        if p.get("type") == 1 and isinstance(p.get("text"), str):
            parts.append(text_part(p["text"]))
        elif p.get("type") == 0 and isinstance(p.get("imageUrl"), dict):
            url = p["imageUrl"].get("url")
            if isinstance(url, str):
                parts.append(data_url(url, "image"))
    if parts:
        return parts
    message = request.get("message")
    text = message.get("text") if isinstance(message, dict) else None
    return [text_part(text if isinstance(text, str) else "")]


def _response_parts(items: Any) -> list[dict[str, Any]]:
    """The parts of a response without round data: thinking and Markdown, in order."""
    parts: list[dict[str, Any]] = []
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        kind = item.get("kind")
        if kind == "thinking":
            text = _thinking(item.get("value"))
            if text:
                parts.append(reasoning_part(text))
            continue
        if kind is None:
            value = item.get("value")
        elif kind == "markdownContent":
            content = item.get("content", item.get("value"))
            value = content.get("value") if isinstance(content, dict) else None
        else:
            continue  # tool invocations, references, edits: shown, not sent
        if isinstance(value, str) and value:
            if parts and parts[-1]["type"] == "text":
                parts[-1] = text_part(parts[-1]["content"] + value)  # streamed in pieces
            else:
                parts.append(text_part(value))
    return parts


def _agent_mode(request: dict[str, Any]) -> bool:
    """Whether the request ran in agent mode, whose history is its tool-call rounds only (the
    response text of a request cut short without rounds was never sent back)."""
    agent = request.get("agent")
    mode = request.get("modeInfo")
    return (isinstance(agent, dict) and str(agent.get("id", "")).endswith(".editsAgent")) or (
        isinstance(mode, dict) and mode.get("kind") == "agent"
    )


def _completed(request: dict[str, Any]) -> bool:
    state = request.get("modelState")
    if isinstance(state, dict):
        return state.get("value") == 1
    return request.get("isCanceled") is not True


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


class CopilotVscodeMapper(Mapper):
    source = "copilot-vscode"
    rewrites = True
    known_raw = frozenset({"session", "$set", "request"})

    @staticmethod
    def rewrite_start(value: dict[str, Any]) -> bool:
        return "requestId" in value or "$set" in value

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = "copilot-vscode"
        #: the last surface node of each tool-call round, for a summary of it
        self.round_end: dict[str, int] = {}
        #: the request being read: its model, its usage (until a reply takes it), its id
        self.model: str | None = None
        self.usage: dict[str, Any] | None = None
        self.response_id: str | None = None

    def sniff(self, value: dict[str, Any]) -> str | None:
        if isinstance(value.get("sessionId"), str) and "requests" not in value:
            return None
        return f"not a {_WHAT} rendering: its first record is not the session's"

    def rewound(self, k: int) -> None:
        nodes = set(self.main.surface.nodes)
        self.round_end = {r: v for r, v in self.round_end.items() if v in nodes}

    def handle(self, v: dict[str, Any]) -> None:
        out = self.main
        if "requestId" in v:
            self._request(out, v)
        elif "$set" in v:
            self.raw_line("$set", known=True)
        elif isinstance(v.get("sessionId"), str):
            self._session(out, v)
            self.raw_line("session", known=True)
        else:
            self.raw_line("(no requestId)", known=False)

    def _session(self, out: Out, v: dict[str, Any]) -> None:
        target = out.target
        if target.meta.get("import"):
            return
        self.time = parse_time(v.get("creationDate")) or self.time
        info: dict[str, Any] = {"session": v["sessionId"]}
        if isinstance(v.get("initialLocation"), str):
            info["location"] = v["initialLocation"]
        folder = v.get("workspaceFolder")
        if isinstance(folder, str):
            info["workspace"] = folder
            target.cwd = path_of_uri(folder)
        target.meta["import"] = info
        target.created = parse_time(v.get("creationDate")) or None

    def _request(self, out: Out, r: dict[str, Any]) -> None:
        self.time = parse_time(r.get("timestamp")) or self.time
        result: dict[str, Any] = r["result"] if isinstance(r.get("result"), dict) else {}
        meta: dict[str, Any] = (
            result["metadata"] if isinstance(result.get("metadata"), dict) else {}
        )
        calls: dict[str, Any] = meta.get("toolCallResults") or {}
        if not isinstance(calls, dict):
            calls = {}
        for call in list(out.pending):  # a turn cut at its tool-call limit: answered here
            if call in calls:
                self._result(out, call, calls[call])
        rid = str(r["requestId"])
        self.start_turn(out)
        message = r.get("message")
        text = message.get("text") if isinstance(message, dict) else None
        self.note_title(out, text)
        self.message(out, "user/message", "user", _prompt(r, meta), rid)
        model = meta.get("resolvedModel") or r.get("modelId")
        self.model = model if isinstance(model, str) else None
        pairs = (("promptTokens", "input_tokens"), ("outputTokens", "output_tokens"))
        usage = {name: meta[src] for src, name in pairs if _count(meta.get(src)) is not None}
        self.usage = usage or None  # the request's: on its first reply (see module doc)
        self.response_id = r.get("responseId") if isinstance(r.get("responseId"), str) else None
        summaries = meta.get("summaries")
        latest = summaries[-1] if isinstance(summaries, list) and summaries else meta.get("summary")
        summary = (
            latest if isinstance(latest, dict) and isinstance(latest.get("text"), str) else None
        )
        if summary is not None and summary.get("toolCallRoundId") in self.round_end:
            self._compact(out, summary)  # of a round of an earlier request
            summary = None
        rounds = [x for x in meta.get("toolCallRounds") or () if isinstance(x, dict)]
        for k, rnd in enumerate(rounds):
            self._round(out, rnd, f"{rid}-round-{k}", calls)
            if summary is not None and summary.get("toolCallRoundId") == rnd.get("id"):
                self._compact(out, summary)
                summary = None
        if not rounds and (not _agent_mode(r) or _completed(r)):
            parts = _response_parts(r.get("response"))
            if parts:
                self._reply(out, f"{rid}-response", parts)
        self.flush_group(out)
        self._close(out, r, result, meta)

    def _reply(self, out: Out, mid: str, parts: list[dict[str, Any]]) -> Any:
        """An assistant message of the current request; the first carries its usage."""
        g = self.group_for(out, mid)
        self.add_line(g)
        g.parts = parts
        g.model = self.model
        if self.usage is not None:
            g.usage, self.usage = self.usage, None
            if self.response_id is not None:
                g.extra["response_id"] = self.response_id
        return g

    def _round(self, out: Out, rnd: dict[str, Any], fallback: str, calls: dict[str, Any]) -> None:
        given = rnd.get("id")
        mid = given if isinstance(given, str) and given else fallback
        parts = []
        text = _thinking(rnd.get("thinking"))
        if text:
            parts.append(reasoning_part(text))
        if isinstance(rnd.get("response"), str) and rnd["response"]:
            parts.append(text_part(rnd["response"]))
        ids = []
        for c in rnd.get("toolCalls") or ():
            if isinstance(c, dict) and isinstance(c.get("id"), str):
                args = json_arguments(c.get("arguments"))
                name = str(c.get("name"))
                parts.append(tool_call_part(c["id"], name, {} if args is None else args))
                ids.append(c["id"])
        if not parts:
            return  # an empty round (a tool input retried): nothing sent
        g = self._reply(out, mid, parts)
        self.flush_group(out)
        end = g.vid
        for call in ids:
            if call in calls:
                end = self._result(out, call, calls[call])
        if isinstance(rnd.get("id"), str) and end is not None:
            self.round_end[rnd["id"]] = end

    def _result(self, out: Out, call: str, result: Any) -> int:
        return self.tool_result(
            out, call, result_text(result), is_error=False, msg_id=f"{call}-result",
            tag=f"result:{call}", raw=False,
        )  # fmt: skip

    def _compact(self, out: Out, summary: dict[str, Any]) -> None:
        end = self.round_end.get(str(summary.get("toolCallRoundId")))
        nodes = out.surface.nodes
        if end is None or end not in nodes:
            return
        if self.start_compaction(
            out, "summary", _count(summary.get("contextLengthBefore")), end=end
        ):
            text = summary["text"]
            shown = f"<conversation-summary>\n{text}\n</conversation-summary>"
            mid = f"summary-{summary.get('toolCallRoundId')}"
            self.finish_compaction(out, text, mid, tag="summary", shown=shown)

    def _close(
        self, out: Out, r: dict[str, Any], result: dict[str, Any], meta: dict[str, Any]
    ) -> None:
        """End the request's turn as its ``modelState`` says."""
        if meta.get("maxToolCallsExceeded") is True and out.pending:
            return  # the next request holds the results
        state = r.get("modelState")
        value = state.get("value") if isinstance(state, dict) else None
        if isinstance(state, dict):
            reason = _DONE.get(value) if isinstance(value, int) else None
            if reason is None:
                return  # pending, or waiting for the user: held until settled
        else:
            reason = "aborted" if r.get("isCanceled") is True else "completed"
        details = result.get("errorDetails")
        error = None
        if isinstance(details, dict):
            error = {
                "code": str(details.get("code") or "error"),
                "message": str(details.get("message")),
            }
            reason = "error" if reason == "completed" else reason
        self.end_turn(out, reason, error, tag="end")


#: VS Code's user directory on each platform, for VS Code, its Insiders build and VSCodium.
_USER = ("${XDG_CONFIG_HOME:-~/.config}", "~/Library/Application Support", "%APPDATA%")
_wanted, _skip = split_take(take)
AGENTS = (
    Agent(
        "copilot-vscode",
        "Copilot Chat in VS Code",
        CopilotVscodeMapper,
        tuple(
            Home((plat,), f"{base}/{editor}/User")
            for editor in ("Code", "Code - Insiders", "VSCodium")
            for plat, base in zip(PLATFORMS, _USER, strict=True)
        ),
        "chatSessions/<id>.jsonl, chatSessions/<id>.json",
        _wanted,
        units=units,
        skip=_skip,
    ),
)
