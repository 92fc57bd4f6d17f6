"""Continue sessions (``~/.continue/sessions/<session id>.json``) to jsonltape.

Continue (continuedev/continue, the VS Code and JetBrains extension and the ``cn`` CLI) keeps
one JSON document per session, rewritten whole with ``fs.writeFileSync`` on every change
(``core/util/history.ts`` ``HistoryManager.save``): ``{sessionId, title, workspaceDirectory,
history, mode?, chatModelTitle?, usage?}``; ``history`` is a list of ``ChatHistoryItem``
``{message, contextItems, editorState?, promptLogs?, toolCallStates?, reasoning?,
conversationSummary?, ...}`` (``core/index.d.ts``). ``sessions.json`` beside them lists the
sessions with ``dateCreated`` (epoch ms as a string). Nothing in a session has a time of its own.

A session is read as records (:func:`unit`): ``{sessionId, workspaceDirectory}``, each history
item as stored, then ``{"$set": {title, mode, chatModelTitle, usage}}`` (what every save
rewrites). Until the file is settled its last item and the ``$set`` are held back. The title is
the session's own (unless Continue's ``New Session``), a rename a ``session/title``; the
creation time is the index's ``dateCreated``. A file rewritten from an earlier item on (an
edited or re-run message, a compaction) is imported as a rewrite (:mod:`._rewrite`) from the
prompt before the first item that changed.

Mapping, as Continue sends the history (``gui/src/redux/util/constructMessages.ts``):

* ``user`` item: a prompt starting a turn: the non-blank ``contextItems`` (each its ``content``
  and a newline) as text parts, then the message's parts (text; ``imageUrl`` a blob for a
  ``data:`` URL, else a uri); an empty prompt is not sent (``import/raw``);
* ``thinking`` item: a reasoning part of the reply it precedes (its ``signature`` only when the
  reply came from Continue's ``anthropic`` provider, ``promptLogs[].modelProvider``);
* ``assistant`` item: an ``assistant/message`` (text, a ``tool_call`` per ``toolCalls[]``, its
  ``arguments`` decoded when they are a JSON object text), ``model`` = ``promptLogs[0].
  modelTitle`` (the title the user gave the model), ``usage``; then a ``tool/result`` per
  ``toolCallStates[]`` worded as Continue sends it: ``The user cancelled this tool call.``
  (``canceled``), the ``output`` items' contents joined by blank lines (``run_terminal_command``:
  each followed by ``[Status: …]``), ``There was an error calling the tool.`` (``errored``
  without output), else ``No tool output``; ``errored`` and ``canceled`` are errors. An empty
  reply without calls is not sent (``import/raw``);
* ``tool`` item: what Continue sends is the call's state (above), so it is ``import/raw``, unless
  the call has no state: then it is the call's result;
* ``system`` item: not sent (``import/raw``);
* ``conversationSummary`` on an item: Continue sends only the items after it, with ``Previous
  conversation summary:\\n\\n <summary>`` in the system message: a compaction of everything so
  far, its replacing message that text.

Usage (``message.usage``): ``promptTokens``, ``completionTokens``, ``promptTokensDetails.
{cachedTokens, cacheWriteTokens}``, ``completionTokensDetails.reasoningTokens``. Continue's
Anthropic provider counts ``promptTokens`` without the cache (Anthropic's ``input_tokens``), its
OpenAI-style providers with the cached tokens: ``input_tokens`` is the input without the cache
either way. A turn is never marked ended: the next prompt or a settled source ends it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .._limits import ascii_int
from ..errors import FormatError
from ._agent import Agent, Home, split_take
from ._base import Mapper, Out
from ._document import read_document, render_records
from ._parts import (
    ANTHROPIC,
    data_url,
    json_arguments,
    parts_of,
    reasoning_part,
    text_of,
    text_part,
    tool_call_part,
)
from ._source import Unit, parse_time, path_of_uri

__all__ = ["AGENTS", "ContinueMapper", "take", "unit", "units"]

#: The title Continue gives a session it has not named yet (``NEW_SESSION_TITLE``).
NEW_SESSION = "New Session"
#: What Continue sends for a tool call without output (core/tools/constants.ts).
NO_OUTPUT = "No tool output"
CANCELLED = "The user cancelled this tool call."
ERRORED = "There was an error calling the tool."
#: The terminal tool, whose outputs carry their status (``BuiltInToolNames.RunTerminalCommand``).
_TERMINAL = "run_terminal_command"
#: What every save rewrites: the last record.
_VOLATILE = ("title", "mode", "chatModelTitle", "usage")
_INDEX = "sessions.json"


# -- layout ---------------------------------------------------------------------------------


def take(path: Path) -> bool | str:
    """A session file of a ``sessions`` folder (not its ``sessions.json`` index)."""
    return path.parent.name == "sessions" and path.suffix == ".json" and path.name != _INDEX


def units(path: Path) -> list[Unit] | None:
    """A session document as a unit (none for ``sessions.json`` or another file); None for a
    directory, which is walked."""
    if path.is_dir():
        return None
    if path.name == _INDEX or path.suffix != ".json":
        return []
    return [unit(path)]


#: Each index read, by its path: ``((size, mtime_ns), {session id: dateCreated})`` (an import
#: of a tree reads it once, not once per session).
_INDEXES: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}


def _created(path: Path) -> int | None:
    """The session's ``dateCreated`` in the ``sessions.json`` beside it (epoch ms), if any."""
    index = path.with_name(_INDEX)
    try:
        st = os.stat(index, follow_symlinks=False)
    except OSError:
        return None
    key = (st.st_size, st.st_mtime_ns)
    cached = _INDEXES.get(str(index))
    if cached is None or cached[0] != key:
        try:
            value = read_document(index, "Continue index", "index")
        except (OSError, FormatError):
            value = None
        dates = {
            e["sessionId"]: e.get("dateCreated")
            for e in (value if isinstance(value, list) else ())
            if isinstance(e, dict) and isinstance(e.get("sessionId"), str)
        }
        cached = _INDEXES[str(index)] = (key, dates)
    created = cached[1].get(path.stem)
    number = ascii_int(created)
    return parse_time(created if number is None else number)


def _title(path: Path) -> str | None:
    """The title Continue shows (read when the import needs it: an unchanged session's file is
    never read); the render gives the verdict on a file it cannot read."""
    try:
        value = read_document(path, "Continue session", "session")
    except (OSError, FormatError):
        return None
    named = value.get("title") if isinstance(value, dict) else None
    return named if isinstance(named, str) and named.strip() != NEW_SESSION else None


def unit(path: Path) -> Unit:
    """A session file as a :class:`Unit` of records (see the module doc)."""
    st = os.stat(path, follow_symlinks=False)

    def render(settled: bool) -> tuple[bytes, int]:
        value = read_document(path, "Continue session", "session")
        if not isinstance(value, dict) or not isinstance(value.get("history"), list):
            raise FormatError("not a Continue session: not an object with a history", path=path)
        if not isinstance(value.get("sessionId"), str):
            raise FormatError("not a Continue session: no sessionId", path=path)
        head = {k: value[k] for k in ("sessionId", "workspaceDirectory") if k in value}
        records: list[Any] = [head, *value["history"]]
        records.append({"$set": {k: value[k] for k in _VOLATILE if k in value}})
        return render_records(records, 2 if len(records) > 2 else 1, settled)

    return Unit(
        str(path), path.name, st.st_size, st.st_mtime_ns, render, lambda: _title(path),
        _created(path),
    )  # fmt: skip


# -- mapping --------------------------------------------------------------------------------


def _content_block(b: dict[str, Any]) -> dict[str, Any] | None:
    if b.get("type") == "text" and isinstance(b.get("text"), str):
        return text_part(b["text"])
    image = b.get("imageUrl")
    if b.get("type") == "imageUrl" and isinstance(image, dict):
        url = image.get("url")
        return data_url(url, "image") if isinstance(url, str) else None
    return None


def _text(content: Any) -> str:
    """A message's content as text (a string, or its text parts joined)."""
    return content if isinstance(content, str) else text_of(parts_of(content, _content_block))


def _context(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The context items Continue puts before the prompt, each its content and a newline."""
    items = item.get("contextItems")
    texts = (
        [c.get("content") for c in items if isinstance(c, dict)] if isinstance(items, list) else []
    )
    return [text_part(f"{t}\n") for t in texts if isinstance(t, str) and t.strip()]


def _empty(message: dict[str, Any]) -> bool:
    """Continue's ``chatMessageIsEmpty``: a message it does not send."""
    content = message.get("content")
    blank = isinstance(content, str) and not content.strip()
    if message.get("role") == "assistant":
        return blank and not message.get("toolCalls")
    return blank and message.get("role") in ("user", "system")


def _provider(item: dict[str, Any]) -> str | None:
    logs = item.get("promptLogs")
    for log in logs if isinstance(logs, list) else ():
        if isinstance(log, dict) and isinstance(log.get("modelProvider"), str):
            return str(log["modelProvider"])
    return None


def _model(item: dict[str, Any]) -> str | None:
    logs = item.get("promptLogs")
    for log in logs if isinstance(logs, list) else ():
        if isinstance(log, dict) and isinstance(log.get("modelTitle"), str) and log["modelTitle"]:
            return str(log["modelTitle"])
    return None


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def usage_of(usage: Any, provider: str | None) -> dict[str, Any] | None:
    """Continue's ``Usage`` under jsonltape's names, input without the cache (see module doc)."""
    if not isinstance(usage, dict):
        return None
    prompt = _count(usage.get("promptTokens"))
    output = _count(usage.get("completionTokens"))
    pdet = usage.get("promptTokensDetails")
    cdet = usage.get("completionTokensDetails")
    cached = _count(pdet.get("cachedTokens")) if isinstance(pdet, dict) else None
    written = _count(pdet.get("cacheWriteTokens")) if isinstance(pdet, dict) else None
    thought = _count(cdet.get("reasoningTokens")) if isinstance(cdet, dict) else None
    out: dict[str, Any] = {}
    if prompt is not None:
        apart = provider == ANTHROPIC  # Anthropic's input_tokens leave the cache out
        out["input_tokens"] = prompt if apart else max(prompt - (cached or 0) - (written or 0), 0)
    if output is not None:
        out["output_tokens"] = output
    if cached:
        out["cache_read_input_tokens"] = cached
    if written:
        out["cache_creation_input_tokens"] = written
    if thought:
        out["reasoning_tokens"] = thought
    return out or None


def result_text(state: dict[str, Any]) -> tuple[str, bool]:
    """What Continue sends for a tool call's state, and whether it is an error."""
    status = state.get("status")
    output = [o for o in state.get("output") or () if isinstance(o, dict)]
    call = state.get("toolCall")
    fn = call.get("function") if isinstance(call, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    if status == "canceled":
        return CANCELLED, True
    if output:
        texts = []
        for o in output:
            text = str(o.get("content", ""))
            if name == _TERMINAL and o.get("status"):
                text += f"\n[Status: {o['status']}]"
            texts.append(text)
        return "\n\n".join(texts), status == "errored"
    if status == "errored":
        return ERRORED, True
    return NO_OUTPUT, False


class ContinueMapper(Mapper):
    source = "continue"
    implicit_end = True
    rewrites = True
    known_raw = frozenset({"session", "$set", "message/tool", "message/system", "message/empty"})

    @staticmethod
    def rewrite_start(value: dict[str, Any]) -> bool:
        message = value.get("message")
        return "$set" in value or (isinstance(message, dict) and message.get("role") == "user")

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = "continue"
        #: the reasoning parts of ``thinking`` items waiting for their reply, with signatures
        self.thinking: list[tuple[dict[str, Any], Any]] = []
        #: the provider of the latest reply that names one (its ``promptLogs``)
        self.provider: str | None = None

    def sniff(self, value: dict[str, Any]) -> str | None:
        if isinstance(value.get("sessionId"), str) and "history" not in value:
            return None
        return "not a Continue session rendering: its first record is not the session's"

    def rewound(self, k: int) -> None:
        self.thinking.clear()

    def handle(self, v: dict[str, Any]) -> None:
        out = self.main
        message = v.get("message")
        if isinstance(message, dict):
            self._item(out, v, message)
        elif "$set" in v:
            self.raw_line("$set", known=True)
        elif isinstance(v.get("sessionId"), str):
            self._session(out, v)
            self.raw_line("session", known=True)
        else:
            self.raw_line("(no message)", known=False)

    def _session(self, out: Out, v: dict[str, Any]) -> None:
        target = out.target
        if target.meta.get("import"):
            return
        info: dict[str, Any] = {"session": v["sessionId"]}
        if isinstance(v.get("workspaceDirectory"), str) and v["workspaceDirectory"]:
            info["workspace"] = v["workspaceDirectory"]
            target.cwd = path_of_uri(v["workspaceDirectory"])
        target.meta["import"] = info

    def _item(self, out: Out, item: dict[str, Any], message: dict[str, Any]) -> None:
        role = message.get("role")
        given = message.get("id")
        mid = given if isinstance(given, str) and given else f"continue-{self.n}"
        reasoning = item.get("reasoning")
        if isinstance(reasoning, dict):  # the only times Continue keeps: a reply's reasoning
            self.time = parse_time(reasoning.get("startAt")) or self.time
        if role == "thinking":
            text = _text(message.get("content"))
            g = out.group if out.group is not None else self.group_for(out, mid)
            self.add_line(g, mid)
            part = reasoning_part(text)
            g.parts.append(part)
            self.thinking.append((part, message.get("signature")))
            return
        if role == "assistant" and not _empty(message):
            self._reply(out, item, message, mid)
        elif role == "user" and not _empty(message):
            self.flush_group(out)
            self.start_turn(out)
            parts = [
                text_part(f"{c['content']}\n")
                for c in item.get("contextItems") or ()
                if isinstance(c, dict)
                and isinstance(c.get("content"), str)
                and c["content"].strip()
            ]
            said = parts_of(message.get("content"), _content_block)
            self.note_title(out, text_of(said))
            self.message(out, "user/message", "user", parts + said, mid)
        elif role == "tool" and message.get("toolCallId") in out.pending:
            call = str(message["toolCallId"])
            text = _text(message.get("content"))
            self.tool_result(out, call, text, is_error=False, msg_id=mid, tag=f"result:{call}")
        else:
            kind = "empty" if role in ("user", "assistant") else str(role)
            self.raw_line(f"message/{kind}", known=role in ("tool", "system", "user", "assistant"))
        summary = item.get("conversationSummary")
        if isinstance(summary, str) and summary.strip():
            self._compact(out, summary, mid)

    def _reply(self, out: Out, item: dict[str, Any], message: dict[str, Any], mid: str) -> None:
        if out.turn is None:
            self.start_turn(out)
        g = out.group if out.group is not None else self.group_for(out, mid)
        self.add_line(g, mid)
        provider = self.provider = _provider(item) or self.provider
        for part, signature in self.thinking:
            if provider == ANTHROPIC and isinstance(signature, str) and signature:
                part["signature"] = signature
        self.thinking.clear()
        g.parts.extend(parts_of(message.get("content"), _content_block, empty_text=False))
        calls = [c for c in message.get("toolCalls") or () if isinstance(c, dict)]
        ids = [
            c["id"] if isinstance(c.get("id"), str) else f"{mid}-call-{k}"
            for k, c in enumerate(calls)
        ]
        for call_id, c in zip(ids, calls, strict=True):
            fn: dict[str, Any] = c["function"] if isinstance(c.get("function"), dict) else {}
            args = json_arguments(fn.get("arguments"))
            name = str(fn.get("name"))
            g.parts.append(tool_call_part(call_id, name, {} if args is None else args))
        g.model = _model(item)
        g.usage = usage_of(message.get("usage"), provider)
        self.flush_group(out)
        states = {
            s.get("toolCallId"): s for s in item.get("toolCallStates") or () if isinstance(s, dict)
        }
        for call_id in ids:
            state = states.get(call_id)
            if state is None:
                continue  # no state: the tool item after it, else closed when settled
            text, is_error = result_text(state)
            extra = {"status": state["status"]} if isinstance(state.get("status"), str) else None
            self.tool_result(
                out, call_id, text, is_error=is_error, msg_id=f"{call_id}-result",
                tag=f"result:{call_id}", extra=extra, raw=False,
            )  # fmt: skip

    def _compact(self, out: Out, summary: str, mid: str) -> None:
        if self.start_compaction(out, "summary", None):
            shown = f"Previous conversation summary:\n\n {summary}"
            self.finish_compaction(out, summary, f"{mid}-summary", tag="summary", shown=shown)


_wanted, _skip = split_take(take)
AGENTS = (
    Agent(
        "continue",
        "Continue",
        ContinueMapper,
        (Home(("linux", "darwin", "win32"), "${CONTINUE_GLOBAL_DIR:-~/.continue}/sessions"),),
        "sessions/<id>.json",
        _wanted,
        units=units,
        skip=_skip,
    ),
)
