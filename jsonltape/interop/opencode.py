"""OpenCode sessions (its ``opencode.db`` or its older JSON storage tree) to jsonltape.

:mod:`._opencode_store` renders each session as JSONL records; this maps them. The message
and part types are OpenCode's (anomalyco/opencode packages/opencode/src/session/message-v2.ts):

* ``{"type":"session", id, projectID, directory, parentID?, time: {created}, version}``:
  the header (cwd, created, ``meta.import``; a child session's ``parentID``, a subtask's
  session, is kept there as ``parent``). The session's title is OpenCode's own, which it
  rewrites in place and the unit carries beside the records (``Unit.title``); a prompt titles
  a session only when it has none;
* ``{"type":"message", "info": {...}, "parts": [...]}`` with ``info.role`` ``user`` (``time``,
  ``agent``, ``model {providerID, modelID}``) or ``assistant`` (``parentID``, ``modelID``,
  ``providerID``, ``tokens {input, output, reasoning, cache {read, write}}``, ``cost``,
  ``time.completed``, ``finish``, ``error?``, ``summary?``).

Mapping (each record is kept verbatim on the event it produced, else as ``import/raw``): a user
message → a prompt starting a turn (``text`` parts not ``ignored``; ``file`` parts as a blob for
a ``data:`` URL, else a uri; text/plain and directory files are skipped: OpenCode sends their
content as synthetic text parts); a user message with a ``compaction`` part →
``compaction/start`` over everything so far, finished by the next assistant message with
``summary: true`` (its text is the summary); an assistant message → an ``assistant/message``
(``reasoning``, ``text``, and a ``tool_call`` per ``tool`` part) with model, provider and usage
(the message's ``tokens`` and ``cost``), then a ``tool/result`` per tool whose state is
``completed`` (its ``output``) or ``error`` (an error result); a tool still ``pending`` or
``running`` when the source is settled is closed as interrupted. An assistant ``error`` other
than an abort ends the turn with reason ``error``; an abort ends it ``aborted``. As in OpenCode's
``toModelMessages``, a message with an error is left out of the model's context (kept raw) unless
it is an abort after some output (a part other than ``step-start`` and ``reasoning``), and a
tool ``error`` that OpenCode marks ``metadata.interrupted`` with a ``metadata.output`` text
reaches the model as that output, not as an error.
A user ``subtask`` part is the text OpenCode sends for it (``The following tool was executed by
the user``; not a title). ``step-start``, ``step-finish``, ``snapshot``, ``patch``, ``agent`` and
``retry`` parts stay in the record only; an unknown record type is ``import/raw``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._agent import Agent, Home
from ._base import Mapper, Out
from ._source import Unit, parse_time

__all__ = ["AGENTS", "OpenCodeMapper"]

_TOKENS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("reasoning", "reasoning_tokens"),
    ("total", "total_tokens"),
)
_NOT_SENT = frozenset({"text/plain", "application/x-directory"})
#: What OpenCode sends for a ``subtask`` part of a user message (a ``/command`` run as a task).
_SUBTASK = "The following tool was executed by the user"


def _usage(info: dict[str, Any]) -> dict[str, Any] | None:
    tokens = info.get("tokens")
    if not isinstance(tokens, dict):
        return None
    usage: dict[str, Any] = {
        dst: tokens[src] for src, dst in _TOKENS if type(tokens.get(src)) is int
    }
    cache = tokens.get("cache")
    if isinstance(cache, dict):
        for src, dst in (("read", "cache_read_input_tokens"),
                         ("write", "cache_creation_input_tokens")):  # fmt: skip
            if type(cache.get(src)) is int:
                usage[dst] = cache[src]
    if isinstance(info.get("cost"), (int, float)) and not isinstance(info["cost"], bool):
        usage["cost"] = info["cost"]
    return usage or None


def _file(p: dict[str, Any]) -> dict[str, Any] | None:
    url, mime = p.get("url"), p.get("mime")
    if not isinstance(url, str) or not isinstance(mime, str) or mime in _NOT_SENT:
        return None
    modality = mime.split("/")[0] if mime.startswith(("image/", "audio/", "video/")) else "file"
    if url.startswith("data:") and ";base64," in url:
        return {"type": "blob", "content": url.split(",", 1)[1], "mime_type": mime,
                "modality": modality}  # fmt: skip
    return {"type": "uri", "uri": url, "mime_type": mime, "modality": modality}


def _text(p: dict[str, Any]) -> str | None:
    text = p.get("text")
    return text if isinstance(text, str) and text else None


class OpenCodeMapper(Mapper):
    source = "opencode"
    implicit_end = True

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = "opencode"
        #: the compaction request (user message id) an assistant summary answers
        self.compacting: str | None = None

    def sniff(self, value: dict[str, Any]) -> str | None:
        if value.get("type") == "session" and isinstance(value.get("id"), str):
            return None
        return "not an OpenCode session rendering: its first record is not the session's"

    def handle(self, v: dict[str, Any]) -> None:
        t = v.get("type")
        if t == "session":
            self.time = parse_time((v.get("time") or {}).get("created")) or self.time
            self._session(v)
            self.raw_line("session", known=True)
        elif t == "message" and isinstance(v.get("info"), dict):
            info = v["info"]
            parts = [p for p in v.get("parts") or () if isinstance(p, dict)]
            self.time = parse_time((info.get("time") or {}).get("created")) or self.time
            if info.get("role") == "user":
                self._user(info, parts)
            elif info.get("role") == "assistant":
                self._assistant(info, parts)
            else:
                self.raw_line(f"message/{info.get('role')}", known=False)
        else:
            self.raw_line(str(t), known=False)

    def _session(self, v: dict[str, Any]) -> None:
        target = self.main.target
        if target.meta.get("import"):
            return
        info: dict[str, Any] = {"session": v["id"]}
        for src, dst in (("projectID", "project"), ("version", "version"),
                         ("parentID", "parent")):  # fmt: skip
            if isinstance(v.get(src), str) and v[src]:
                info[dst] = v[src]
        target.meta["import"] = info
        if isinstance(v.get("directory"), str) and v["directory"]:
            target.cwd = v["directory"]
        target.created = parse_time((v.get("time") or {}).get("created")) or None

    def _user(self, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        out = self.main
        if any(p.get("type") == "compaction" for p in parts):
            self.end_turn(out, "completed")
            if self.start_compaction(out, "auto" if _auto(parts) else "manual", None):
                self.compacting = str(info.get("id"))
            return
        mapped: list[dict[str, Any]] = []
        said: list[str] = []  # the texts the user's message sends (a title's candidates)
        for p in parts:
            if p.get("type") == "text" and p.get("ignored") is not True:
                text = _text(p)
                if text is not None:
                    mapped.append({"type": "text", "content": text})
                    said.append(text)
            elif p.get("type") == "file":
                f = _file(p)
                if f is not None:
                    mapped.append(f)
            elif p.get("type") == "subtask":  # the task call follows in the reply
                mapped.append({"type": "text", "content": _SUBTASK})
        if not mapped:
            self.raw_line("message/user", known=True)  # nothing OpenCode would send
            return
        self.start_turn(out)
        real = [_text(p) for p in parts if p.get("type") == "text" and not p.get("synthetic")]
        self.note_title(out, "\n".join(t for t in real if t) or "\n".join(said))
        self.message(out, "user/message", "user", mapped, str(info.get("id")))

    def _assistant(self, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        out = self.main
        mid = str(info.get("id"))
        answers = info.get("parentID") in (self.compacting, None)
        if info.get("summary") is True and self.compacting is not None and answers:
            texts = [_text(p) for p in parts if p.get("type") == "text"]
            self.compacting = None
            self.finish_compaction(out, "\n\n".join(t for t in texts if t), mid)
            return
        if out.turn is None:
            self.start_turn(out)
        error = info.get("error")
        if isinstance(error, dict) and not _sent_despite(error, parts):
            self._failed(out, error)
            self.raw_line("message/assistant", known=True)  # OpenCode never sends it again
            return
        g = self.group_for(out, mid)
        self.add_line(g, mid)
        mapped: list[dict[str, Any]] = []
        tools: list[dict[str, Any]] = []
        for p in parts:
            t = p.get("type")
            if t in ("text", "reasoning"):
                text = _text(p)
                if text is not None:
                    mapped.append({"type": t, "content": text})
            elif t == "tool" and isinstance(p.get("callID"), str):
                state: dict[str, Any] = p["state"] if isinstance(p.get("state"), dict) else {}
                args = state.get("input")
                mapped.append({"type": "tool_call", "id": p["callID"], "name": str(p.get("tool")),
                               "arguments": args if isinstance(args, dict) else {}})  # fmt: skip
                tools.append(p)
        g.parts = mapped
        if isinstance(info.get("modelID"), str) and info["modelID"]:
            g.model = info["modelID"]
        g.usage = _usage(info)
        if isinstance(info.get("providerID"), str) and info["providerID"]:
            self.set_request(out, provider=info["providerID"])
        for p in tools:
            self._result(out, p)
        self.flush_group(out)
        if isinstance(error, dict):
            self._failed(out, error)

    def _failed(self, out: Out, error: dict[str, Any]) -> None:
        """The turn ends with the message's error (unless calls still wait for results)."""
        name = str(error.get("name") or "error")
        data: dict[str, Any] = error["data"] if isinstance(error.get("data"), dict) else {}
        err: dict[str, Any] = {"code": name}
        if isinstance(data.get("message"), str):
            err["message"] = data["message"]
        reason = "aborted" if name == "MessageAbortedError" else "error"
        if not out.pending:
            self.end_turn(out, reason, err, tag="error")

    def _result(self, out: Out, p: dict[str, Any]) -> None:
        state: dict[str, Any] = p["state"] if isinstance(p.get("state"), dict) else {}
        status = state.get("status")
        call = p["callID"]
        if status == "completed":
            response: Any = state.get("output")
            is_error = False
        elif status == "error":
            meta: dict[str, Any] = state.get("metadata") or {}
            meta = meta if isinstance(meta, dict) else {}
            interrupted = meta.get("interrupted") is True and isinstance(meta.get("output"), str)
            response = meta["output"] if interrupted else state.get("error")
            is_error = not interrupted
        else:
            return  # pending or running: closed as interrupted if the source settles
        self.tool_result(
            out, call, response if isinstance(response, str) else "", is_error=is_error,
            msg_id=f"{call}-result", tag=f"result:{call}", extra={"status": status},
        )  # fmt: skip


def _sent_despite(error: dict[str, Any], parts: list[dict[str, Any]]) -> bool:
    """Whether OpenCode still sends a message that has an error: an abort after some output."""
    return error.get("name") == "MessageAbortedError" and any(
        p.get("type") not in ("step-start", "reasoning") for p in parts
    )


def _auto(parts: list[dict[str, Any]]) -> bool:
    return any(p.get("type") == "compaction" and p.get("auto") is True for p in parts)


def _store(path: Path) -> list[Unit]:
    from ._opencode_store import units  # the database reader loads sqlite3: when it is used

    return units(path)


def _wanted(path: Path) -> bool:
    # an import takes the store as a whole (a database, a tree, the data directory); the
    # read-only index finds the database in a tree (the JSON storage tree is import-only)
    return path.name == "opencode.db"


AGENTS = (
    Agent(
        "opencode",
        "OpenCode",
        OpenCodeMapper,
        (Home(("linux", "darwin", "win32"), "${XDG_DATA_HOME:-~/.local/share}/opencode"),),
        "opencode.db, storage/session/*/*.json",
        _wanted,
        units=_store,
        keyed=True,
    ),
)
