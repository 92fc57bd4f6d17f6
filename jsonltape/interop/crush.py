"""Crush sessions (a project's ``.crush/crush.db``) to jsonltape.

:mod:`._crush_store` renders each session of the database as JSONL records; this maps them. The
part types are Crush's (charmbracelet/crush ``internal/message/content.go`` at commit
37f36e93824e5c4f892e4a817f7f628e2682fe14, read to learn the format: FSL-1.1-MIT, nothing
copied): ``{"type": "text", "data": {text}}``, ``reasoning`` ``{thinking, signature,
thought_signature, responses_data, ...}``, ``image_url`` ``{url}``, ``binary`` ``{Path,
MIMEType, Data}`` (Go field names, ``Data`` base64), ``tool_call`` ``{id, name, input}`` (the
arguments as JSON text), ``tool_result`` ``{tool_call_id, name, content, data, mime_type,
metadata, is_error}``, ``finish`` ``{reason, time, message?, details?}`` and ``shell_command``
``{command, output, exit_code}``.

Mapping (each record is kept verbatim on the event it produced, else as ``import/raw``), as
Crush sends its history (``Message.ToAIMessage``): a ``user`` message → a prompt starting a turn:
its first text (trimmed), then text attachments (``binary`` parts of a ``text/`` type) in Crush's
``<file path='…'>`` wording, then each shell command as ``$ command``, its output and ``(exit
code N)``; other ``binary`` parts → blobs. An ``assistant`` message → an ``assistant/message``:
the reasoning (signed only when Crush's provider was ``anthropic``), the first text (trimmed),
a ``tool_call`` per call (arguments decoded when they are a JSON object text); ``model`` and a
``request/header`` with the provider. Its ``finish`` ends the turn: ``end_turn`` (``stop`` in
older Crush) → ``completed``, ``max_tokens`` → ``max-tokens``, ``canceled`` and
``permission_denied`` → ``aborted``, ``content_filter`` → ``blocked``, ``error`` and
``unknown`` → ``error`` (with ``message`` and ``details``); ``tool_use`` goes on. A ``tool``
message → a ``tool/result`` per ``tool_result`` (``is_error`` kept). A ``system`` message → a
``user/message`` with role ``system``. An assistant message with ``is_summary_message`` is a
compaction of everything before it (Crush then sends the history from the summary on, the
summary as a user message). Crush keeps no per-message usage (only per-session counters it
rewrites in place): none is mapped. A session is titled as Crush shows it (its ``title``).
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path
from typing import Any

from ._agent import Agent
from ._base import Mapper, Out
from ._crush_store import units
from ._parts import (
    ANTHROPIC,
    blob_part,
    json_arguments,
    member,
    reasoning_part,
    text_part,
    tool_call_part,
)
from ._source import parse_time

__all__ = ["AGENTS", "CrushMapper"]

#: How a turn ends by the reason of an assistant message's ``finish`` part (``tool_use``: it
#: goes on with the tools' results).
_END = {
    "end_turn": "completed",
    "stop": "completed",
    "max_tokens": "max-tokens",
    "canceled": "aborted",
    "permission_denied": "aborted",
    "content_filter": "blocked",
    "error": "error",
    "unknown": "error",
}
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_ATTACHED = (
    "\n<system_info>The files below have been attached by the user, consider them in your "
    "response</system_info>\n"
)


def _of(parts: list[Any], kind: str) -> list[dict[str, Any]]:
    return [member(p, "data") for p in parts if isinstance(p, dict) and p.get("type") == kind]


def _first_text(parts: list[Any]) -> str:
    texts = [d.get("text") for d in _of(parts, "text")]
    return texts[0].strip() if texts and isinstance(texts[0], str) else ""


def _text_file(d: dict[str, Any]) -> bool:
    return isinstance(d.get("MIMEType"), str) and d["MIMEType"].startswith("text/")


def user_parts(parts: list[Any]) -> list[dict[str, Any]]:
    """What Crush sends for a user message: its text with the text attachments and shell
    commands it adds, then the other files."""
    text = _first_text(parts)
    files = [d for d in _of(parts, "binary") if _text_file(d)]
    if files:
        text += _ATTACHED
        for d in files:
            path = d.get("Path")
            text += f"<file path='{path}'>\n" if isinstance(path, str) and path else "<file>\n"
            try:
                content = base64.b64decode(str(d.get("Data") or ""), validate=True)
            except (binascii.Error, ValueError):
                content = b""
            text += "\n" + content.decode("utf-8", "replace") + "\n</file>\n"
    for d in _of(parts, "shell_command"):
        output = _ANSI.sub("", str(d.get("output") or ""))
        shell = f"$ {d.get('command')}\n{output}\n(exit code {d.get('exit_code')})"
        text = f"{text}\n\n{shell}" if text else shell
    out = [text_part(text)] if text else []
    for d in _of(parts, "binary"):
        if not _text_file(d) and isinstance(d.get("Data"), str):
            mime = str(d.get("MIMEType") or "application/octet-stream")
            out.append(blob_part(d["Data"], mime, mime.split("/")[0]))
    return out


def assistant_parts(parts: list[Any], provider: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for d in _of(parts, "reasoning")[:1]:
        thinking = d.get("thinking")
        if isinstance(thinking, str) and thinking:
            signer = ANTHROPIC if provider == "anthropic" else None
            out.append(reasoning_part(thinking, d.get("signature"), signed_by=signer))
    text = _first_text(parts)
    if text:
        out.append(text_part(text))
    for d in _of(parts, "tool_call"):
        if isinstance(d.get("id"), str) and d["id"]:
            args = json_arguments(d.get("input"))
            out.append(tool_call_part(d["id"], str(d.get("name")), args))
    return out


class CrushMapper(Mapper):
    source = "crush"
    implicit_end = True

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = "crush"
        where = Path(path).absolute().parent
        if where.name == ".crush":  # the project's data directory (Crush's default)
            self.main.target.cwd = str(where.parent)

    def sniff(self, value: dict[str, Any]) -> str | None:
        if value.get("type") == "session" and isinstance(value.get("id"), str):
            return None
        return "not a Crush session rendering: its first record is not the session's"

    def handle(self, v: dict[str, Any]) -> None:
        t = v.get("type")
        if t == "session":
            self._session(v)
            return
        if t != "message" or not isinstance(v.get("parts"), list):
            self.raw_line(str(t), known=False)
            return
        self.time = parse_time(v.get("created_at")) or self.time
        role = v.get("role")
        if v.get("is_summary_message") is True:
            self._summarized(v)
        elif role == "user":
            self._user(v)
        elif role == "assistant":
            self._assistant(v)
        elif role == "tool":
            self._results(v)
        elif role == "system":
            text = _first_text(v["parts"])
            if text:
                self.message(self.main, "user/message", "system", [text_part(text)], v["id"])
        else:
            self.raw_line(f"message/{role}", known=False)

    def _session(self, v: dict[str, Any]) -> None:
        target = self.main.target
        if target.meta.get("import"):
            return
        self.time = parse_time(v.get("created_at")) or self.time
        info: dict[str, Any] = {"session": v["id"]}
        parent = v.get("parent_session_id")
        if isinstance(parent, str) and parent:
            info["parent"] = parent
            _msg, sep, call = v["id"].partition("$$")
            if sep:
                info["spawned_by"] = call  # the agent tool call that started it
        target.meta["import"] = info
        target.created = self.time or None
        self.raw_line("session", known=True)

    def _user(self, v: dict[str, Any]) -> None:
        parts = user_parts(v["parts"])
        if not parts:
            self.raw_line("message/user", known=True)  # nothing Crush sends
            return
        out = self.main
        self.start_turn(out)
        self.note_title(out, _first_text(v["parts"]))
        self.message(out, "user/message", "user", parts, v["id"])

    def _assistant(self, v: dict[str, Any]) -> None:
        out = self.main
        if out.turn is None:
            self.start_turn(out)
        parts = assistant_parts(v["parts"], v.get("provider"))
        if isinstance(v.get("provider"), str):
            self.set_request(out, provider=v["provider"])
        finish = next(iter(_of(v["parts"], "finish")), None)
        if parts:
            g = self.group_for(out, v["id"])
            self.add_line(g, v["id"])
            g.parts = parts
            if isinstance(v.get("model"), str) and v["model"]:
                g.model = v["model"]
            if finish is not None:
                g.extra["stop_reason"] = finish.get("reason")
            self.flush_group(out)
        elif finish is None:
            self.raw_line("message/assistant", known=True)
        if finish is not None:
            self._finish(out, finish)

    def _finish(self, out: Out, finish: dict[str, Any]) -> None:
        reason = _END.get(str(finish.get("reason")))
        if reason is None:
            return  # tool_use: the results and the next call follow
        error = None
        if reason == "error":
            error = {"code": str(finish.get("reason"))}
            said = " ".join(str(finish[k]) for k in ("message", "details") if finish.get(k))
            if said:
                error["message"] = said
        self.end_turn(out, reason, error, raw=True)  # the record, if no message carries it

    def _results(self, v: dict[str, Any]) -> None:
        out = self.main
        results = [d for d in _of(v["parts"], "tool_result") if isinstance(d.get("tool_call_id"),
                                                                            str)]  # fmt: skip
        if not results:
            self.raw_line("message/tool", known=True)
            return
        for i, d in enumerate(results):
            call = d["tool_call_id"]
            content = d.get("content")
            self.tool_result(
                out, call, content if isinstance(content, str) else "",
                is_error=d.get("is_error") is True, msg_id=f"{v['id']}.{i}",
                tag=f"result:{i}" if i else None,
            )  # fmt: skip

    def _summarized(self, v: dict[str, Any]) -> None:
        """A summary message: Crush continues from it (sent as a user message)."""
        out = self.main
        self.end_turn(out, "completed")
        text = _first_text(v["parts"])
        if self.start_compaction(out, "summarize", None):
            self.finish_compaction(out, text, v["id"])
        else:
            self.raw_line("message/summary", known=True)


def _wanted(path: Path) -> bool:
    return path.name == "crush.db"


AGENTS = (
    Agent(
        "crush",
        "Crush",
        CrushMapper,
        (),  # per project only: <project>/.crush/crush.db
        "crush.db (in a project's .crush/)",
        _wanted,
        units=units,
        keyed=True,
        projects=(".crush/crush.db",),
    ),
)
