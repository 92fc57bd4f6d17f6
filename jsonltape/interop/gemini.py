"""Gemini CLI chat recordings (``~/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl``;
a subagent's under ``chats/<parent session id>/<session id>.jsonl``) to jsonltape.

The format is the one Gemini CLI's ``ChatRecordingService`` appends
(google-gemini/gemini-cli packages/core/src/services/chatRecordingService.ts and
chatRecordingTypes.ts): one JSON value per line, read back by ``loadConversationRecord``:

* the first line, ``{sessionId, projectHash, startTime, lastUpdated, kind?, directories?}``:
  the session's metadata (raw only);
* ``MessageRecord`` s ``{id, timestamp, type, content, displayContent?}``, ``type`` one of
  ``user``, ``gemini``, ``info``, ``error``, ``warning``; a ``gemini`` record adds
  ``thoughts`` (``[{subject, description, timestamp}]``), ``tokens``
  (``{input, output, cached, thoughts?, tool?, total}``), ``model`` and ``toolCalls``
  (``[{id, name, args, result?, status, timestamp, ...}]``, ``result`` a part list holding
  the ``functionResponse``). A message is appended again, whole, each time it changes (its
  tokens arrive, its tool calls are added or finish): the last record with an id wins;
* ``{"$set": {...}}`` metadata updates (``summary``, ``lastUpdated``, ``directories``, or a
  whole ``messages`` list synced from memory) and ``{"$rewindTo": id}``: the messages from
  that one on are dropped (all of them if it is unknown).

Mapping (each source line is kept verbatim on the event it produced, else as ``import/raw``):
``user`` → a prompt starting a turn; ``gemini`` → an ``assistant/message`` (thoughts as
reasoning, the text, the tool calls) with model and usage, revised in place when the record
is appended again, a ``tool/call`` per call and a ``tool/result`` per call whose ``result`` is
recorded (``status`` ``error`` or ``cancelled``: an error result); ``$rewindTo`` → a
``surface/retract`` (reason ``rewind``) of the messages from the named one on; ``$set``
``summary`` titles the session. ``info``/``error``/``warning`` (shown to the user, never sent to
the model), the metadata line and other ``$set`` s are raw only. Gemini CLI never marks the end
of a turn: the next prompt (or a finished source) ends it.

The legacy whole-file ``session-*.json`` (one pretty-printed ``ConversationRecord``
``{sessionId, projectHash, startTime, lastUpdated, messages, summary?, directories?, kind?}``,
rewritten whole on every change; Gemini CLI migrates it to ``.jsonl`` when it is resumed) is
read as the same records (:func:`legacy_unit`): the metadata without what changes on every save,
each message, then ``{"$set": {summary, lastUpdated}}``. Until the file is settled its last
message and that ``$set`` are held back: the CLI may still rewrite them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from ..errors import FormatError, JsonltapeError
from ..events import Retract
from ._base import Group, Mapper, Out, title_of
from ._parts import (
    blob_part,
    reasoning_part,
    renamed_usage,
    text_of,
    text_part,
    tool_call_part,
    uri_part,
)
from ._source import Unit, parse_time

__all__ = ["GeminiMapper", "legacy_unit"]

_encode = msgspec.json.Encoder().encode
#: Metadata of a legacy chat that never changes after the session starts (its first record).
_LEGACY_META = ("sessionId", "projectHash", "startTime", "kind", "directories")
#: ... and what every save rewrites (its last record).
_LEGACY_SET = ("summary", "lastUpdated")

_UI_ONLY = frozenset({"info", "error", "warning"})
_ERROR_STATUS = frozenset({"error", "cancelled"})
_TOKENS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cached", "cache_read_input_tokens"),
    ("thoughts", "reasoning_tokens"),
    ("tool", "tool_use_prompt_tokens"),
    ("total", "total_tokens"),
)


def gemini_parts(content: Any) -> list[dict[str, Any]]:
    """jsonltape parts of a ``PartListUnion`` (a string, a part, or a list of either)."""
    items = content if isinstance(content, list) else [content]
    parts: list[dict[str, Any]] = []
    for p in items:
        if isinstance(p, str):
            if p:
                parts.append(text_part(p))
        elif not isinstance(p, dict):
            continue
        elif isinstance(p.get("text"), str):
            if p["text"]:
                thought = p.get("thought") is True
                parts.append(reasoning_part(p["text"]) if thought else text_part(p["text"]))
        elif isinstance(p.get("inlineData"), dict):
            d = p["inlineData"]
            mime = d.get("mimeType") if isinstance(d.get("mimeType"), str) else ""
            if isinstance(d.get("data"), str):
                modality = mime.split("/")[0] if "/" in mime else "file"
                parts.append(blob_part(d["data"], mime, modality))
        elif isinstance(p.get("fileData"), dict):
            d = p["fileData"]
            uri = d.get("fileUri")
            if isinstance(uri, str):
                mime = d.get("mimeType") if isinstance(d.get("mimeType"), str) else ""
                parts.append(uri_part(uri, mime_type=mime, modality="file"))
    return parts


def _thought(t: Any) -> dict[str, Any] | None:
    if not isinstance(t, dict):
        return None
    text = "\n\n".join(
        s.strip()
        for s in (t.get("subject"), t.get("description"))
        if isinstance(s, str) and s.strip()
    )
    return reasoning_part(text) if text else None


def _usage(tokens: Any) -> dict[str, Any] | None:
    return renamed_usage(tokens, _TOKENS, ints_only=True) or None


def _response(result: Any) -> Any:
    """What a tool answered: the ``functionResponse`` 's ``output`` (or ``error``) text when
    that is all it holds, else its whole response; a result of other parts as it is."""
    items = result if isinstance(result, list) else [result]
    responses = [
        p["functionResponse"].get("response")
        for p in items
        if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
    ]
    if len(responses) == 1 and len(items) == 1:
        r = responses[0]
        if isinstance(r, dict) and len(r) == 1:
            value = r.get("output", r.get("error"))
            if isinstance(value, str):
                return value
        return r
    return result


class GeminiMapper(Mapper):
    source = "gemini-cli"
    implicit_end = True

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = "gemini-cli"
        self._named = False
        #: each gemini message's group (it is appended again, whole, when it changes)
        self.groups: dict[str, Group] = {}
        #: the surface node of each message id
        self.nodes: dict[str, int] = {}
        #: tool calls whose result is on the tape
        self.answered: set[str] = set()

    def sniff(self, value: dict[str, Any]) -> str | None:
        if isinstance(value.get("sessionId"), str) and isinstance(value.get("projectHash"), str):
            return None
        if isinstance(value.get("id"), str) and value.get("type") in ("user", "gemini"):
            return None
        if "payload" in value:
            return "this looks like a Codex rollout (use --from codex)"
        if value.get("type") == "session":
            return "this looks like a pi session (use --from pi)"
        if "uuid" in value:
            return "this looks like a Claude Code transcript (use --from claude-code)"
        return (
            "not a Gemini CLI chat recording: its first line is neither the session's metadata "
            "nor a message record"
        )

    def handle(self, v: dict[str, Any]) -> None:
        out = self.main
        if isinstance(v.get("$rewindTo"), str):
            self._rewind(out, v["$rewindTo"])
        elif isinstance(v.get("$set"), dict):
            summary = v["$set"].get("summary")
            if isinstance(summary, str) and summary.strip():
                out.target.title = title_of(summary)
                self._named = True
            self.raw_line("$set", known=True)
        elif isinstance(v.get("id"), str):
            self.time = parse_time(v.get("timestamp")) or self.time
            t = v.get("type")
            if t == "user":
                self._user(out, v)
            elif t == "gemini":
                self._gemini(out, v)
            elif t in _UI_ONLY:
                self.raw_line(str(t), known=True)
            else:
                self.raw_line(str(t), known=False)
        elif isinstance(v.get("sessionId"), str):
            self._metadata(out, v)
            self.raw_line("session", known=True)
        else:
            self.raw_line("(no type)", known=False)

    def _metadata(self, out: Out, v: dict[str, Any]) -> None:
        if out.target.meta.get("import"):
            return  # the session id updated on resume, or concatenated files: raw only
        info: dict[str, Any] = {"session": v["sessionId"]}
        for src, dst in (("projectHash", "project_hash"), ("kind", "kind")):
            if isinstance(v.get(src), str):
                info[dst] = v[src]
        dirs = v.get("directories")
        if isinstance(dirs, list) and dirs and all(isinstance(d, str) for d in dirs):
            info["directories"] = dirs
            out.target.cwd = dirs[0]
        out.target.meta["import"] = info
        out.target.created = parse_time(v.get("startTime")) or None
        if isinstance(v.get("summary"), str) and v["summary"].strip():
            out.target.title = title_of(v["summary"])
            self._named = True

    def _user(self, out: Out, v: dict[str, Any]) -> None:
        mid = v["id"]
        if mid in self.nodes and out.surface.is_current(self.nodes[mid]):
            self.raw_line("user", known=True)  # the same prompt again (a history sync)
            return
        parts = gemini_parts(v.get("content"))
        self.start_turn(out)
        if not self._named:
            self.note_title(out, text_of(parts))
        self.nodes[mid] = self.message(out, "user/message", "user", parts, mid)

    def _gemini(self, out: Out, v: dict[str, Any]) -> None:
        mid = v["id"]
        g = self.groups.get(mid)
        if g is not None and out.group is not g:
            if g.vid is None or not out.surface.is_current(g.vid):
                self.raw_line("gemini", known=True)  # rewound away: nothing to revise
                return
            self.flush_group(out)
            out.group = g  # appended again: revise the message emitted for it
        if out.turn is None:
            self.start_turn(out)
        g = self.group_for(out, mid)
        self.groups[mid] = g
        self.add_line(g, mid)
        parts: list[dict[str, Any]] = []
        thoughts = v.get("thoughts")
        for t in thoughts if isinstance(thoughts, list) else ():
            part = _thought(t)
            if part is not None:
                parts.append(part)
        parts.extend(gemini_parts(v.get("content")))
        calls = [c for c in v.get("toolCalls") or () if isinstance(c, dict)]
        for c in calls:
            if not isinstance(c.get("id"), str):
                raise ValueError("a tool call without an id")
            args = c.get("args")
            parts.append(
                tool_call_part(c["id"], str(c.get("name")), args if isinstance(args, dict) else {})
            )
        g.parts = parts
        if isinstance(v.get("model"), str) and v["model"]:
            g.model = v["model"]
        usage = _usage(v.get("tokens"))
        if usage is not None:
            g.usage = usage
        for c in calls:
            if c.get("result") is None or c["id"] in self.answered:
                continue
            self.answered.add(c["id"])
            self.tool_result(
                out,
                c["id"],
                _response(c["result"]),
                is_error=c.get("status") in _ERROR_STATUS,
                msg_id=f"{c['id']}-result",
                tag=f"result:{c['id']}",
                extra={"status": c["status"]} if isinstance(c.get("status"), str) else None,
            )
        if g.vid is not None:
            self.nodes[mid] = g.vid

    def _rewind(self, out: Out, mid: str) -> None:
        """Drop the messages from ``mid`` on (all of them if it is not known), as
        ``loadConversationRecord`` does."""
        self.end_turn(out, "completed", tag="rewind:end")
        self.flush_group(out)
        g = self.groups.get(mid)
        vid = g.vid if g is not None else self.nodes.get(mid)
        nodes = out.surface.nodes
        after = nodes[nodes.index(vid) :] if vid in nodes else ([] if mid in self.nodes else nodes)
        if not after:
            self.raw_line("$rewindTo", known=True)
            return
        try:
            out.surface.removed_by("surface/retract", Retract(after[0], after[-1]))
        except JsonltapeError:
            self.raw_line("$rewindTo", known=True)
            return
        data = {"reason": "rewind", "import": self.imp()}
        self.emit(
            out, "surface/retract", data, self.key("rewind"),
            surface=("retract", after[0], after[-1]),
        )  # fmt: skip


def legacy_unit(path: Path) -> Unit:
    """A legacy whole-file chat (``session-*.json``) as a :class:`Unit` of JSONL records."""
    st = os.stat(path, follow_symlinks=False)

    def render(settled: bool) -> tuple[bytes, int]:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with open(fd, "rb") as f:
                value = msgspec.json.decode(f.read())
        except msgspec.DecodeError as exc:
            raise FormatError(f"not a Gemini CLI chat: malformed JSON ({exc})", path=path) from None
        if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
            raise FormatError(
                "not a Gemini CLI chat: not an object with a messages list", path=path
            )
        if not isinstance(value.get("sessionId"), str) or not isinstance(
            value.get("projectHash"), str
        ):
            raise FormatError("not a Gemini CLI chat: no sessionId and projectHash", path=path)
        meta = {k: value[k] for k in _LEGACY_META if k in value}
        lines = [_encode(meta)]
        lines.extend(_encode(m) for m in value["messages"])
        held = 1 if len(lines) > 1 else 0  # the last message may still be rewritten
        changes = {k: value[k] for k in _LEGACY_SET if k in value}
        if changes:
            lines.append(_encode({"$set": changes}))
            held += 1
        data = b"".join(line + b"\n" for line in lines)
        if settled:
            return data, 0
        return data, sum(len(line) + 1 for line in lines[len(lines) - held :])

    return Unit(str(path), path.name, st.st_size, st.st_mtime_ns, render)
