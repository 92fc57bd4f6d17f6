"""pi coding agent sessions (``~/.pi/agent/sessions/--<cwd>--/<ts>_<id>.jsonl``) to jsonltape.

Both the legacy linear format (v1: no ``version``, entries without ids) and the tree formats
(v2/v3: ``id``/``parentId``) are read as they are, without pi's own migration.

Mapping (each source line is kept verbatim on the event it produced, else as ``import/raw``):

* the ``session`` header: metadata (id, cwd, ``parentSession``/``branchedFrom``) and a
  ``request/header`` with provider, model and thinking level; ``model_change`` and
  ``thinking_level_change`` update it.
* ``message`` entries by role: ``user`` → a prompt (starts a turn, unless one is running: then
  it is a message the user queued into it, answered in a turn of its own); ``assistant`` → an
  ``assistant/message`` (text, ``thinking`` as reasoning with its signature, ``toolCall`` as
  tool_call) with model and usage, a ``tool/call`` per call, and the turn ends on its
  ``stopReason`` (stop → completed, length → max-tokens, aborted, error); ``toolResult`` →
  ``tool/result``; ``bashExecution`` (a user's ``!command``, as ``bashExecutionToText`` words
  it) and ``custom``/``hookMessage`` → user messages (what pi puts in the model's context).
* ``compaction`` {summary, firstKeptEntryId, tokensBefore}: the messages before the first kept
  entry are replaced by the summary (jsonltape compaction events with the file ledger). Legacy
  v1 compactions name that entry by ``firstKeptEntryIndex`` instead: its position among the
  file's entries (every line that parses as JSON, the header being 0), as pi's
  ``migrateV1ToV2`` reads it; the first message at or after it is the first one kept.
* ``branch_summary`` and ``custom_message``: user messages (a summary framed the way pi sends
  it: ``The following is a summary of a branch ...`` ``<summary>…</summary>``). Moving to
  another branch of the tree (an entry of any kind but a compaction whose parent is not the
  last entry) retracts the abandoned messages.
* ``custom``, ``label``, ``session_info``: raw only (``session_info.name`` titles the session).
"""

from __future__ import annotations

import json
from typing import Any

from ._base import Mapper, Out, title_of
from ._parts import (
    blob_part,
    parts_of,
    reasoning_part,
    renamed_usage,
    text_of,
    text_part,
    tool_call_part,
)
from ._source import SourceLine, parse_time

__all__ = ["PiMapper"]

_KNOWN_RAW = frozenset(
    {"session", "model_change", "thinking_level_change", "custom", "label", "session_info"}
)
_STOP = {"stop": "completed", "length": "max-tokens", "aborted": "aborted", "error": "error"}
#: How pi frames a summary in the model's context (``convertToLlm``, core/messages.ts).
_BRANCH = (
    "The following is a summary of a branch that this conversation came back from:\n\n"
    "<summary>\n{}</summary>"
)
_COMPACTED = (
    "The conversation history before this point was compacted into the following summary:\n\n"
    "<summary>\n{}\n</summary>"
)


_USAGE = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cacheRead", "cache_read_input_tokens"),
    ("cacheWrite", "cache_creation_input_tokens"),
    ("totalTokens", "total_tokens"),
    ("cost", "cost"),
)


def pi_parts(content: Any) -> list[dict[str, Any]]:
    return parts_of(content, _pi_block)


def _pi_block(b: dict[str, Any]) -> dict[str, Any] | None:
    kind = b.get("type")
    if kind == "text" and isinstance(b.get("text"), str):
        return text_part(b["text"])
    if kind == "thinking" and isinstance(b.get("thinking"), str):
        return reasoning_part(b["thinking"], b.get("thinkingSignature"))
    if kind == "toolCall" and isinstance(b.get("id"), str):
        return tool_call_part(b["id"], str(b.get("name")), b.get("arguments"))
    if kind == "image" and isinstance(b.get("data"), str):
        mime = b.get("mimeType")
        return blob_part(b["data"], mime if isinstance(mime, str) else "", "image")
    return None


class PiMapper(Mapper):
    source = "pi"
    known_raw = _KNOWN_RAW

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.version = 1
        self._named = False
        #: the surface node of each of the file's entries in pi's numbering (None: not one)
        self.entries: list[int | None] = []
        self._node: int | None = None

    def feed(self, line: SourceLine) -> None:
        self._node = None
        super().feed(line)
        if line.value is not None or _pi_entry(line):
            self.entries.append(self._node)

    def sniff(self, value: dict[str, Any]) -> str | None:
        if value.get("type") == "session":
            return None
        if "payload" in value:
            return "this looks like a Codex rollout (use --from codex)"
        if "uuid" in value or "sessionId" in value:
            return "this looks like a Claude Code transcript (use --from claude-code)"
        return 'not a pi session: its first line is not a {"type":"session"} header'

    def handle(self, v: dict[str, Any]) -> None:
        self.time = parse_time(v.get("timestamp")) or self.time
        out = self.main
        t = v.get("type")
        entry = v.get("id") if isinstance(v.get("id"), str) and t != "session" else None
        parent = v.get("parentId") if isinstance(v.get("parentId"), str) else None
        if entry is not None:
            # pi's context is the path from the last entry to the root, so an entry of any kind
            # (a model_change after a /tree move) leaves the branch it does not continue
            self.branch_to(out, parent, entry, message=t != "compaction")
        vid: int | None = None
        if t == "session":
            self._session(out, v)
        elif t == "message" and isinstance(v.get("message"), dict):
            vid = self._message(out, v["message"], entry)
        elif t == "model_change":
            self.set_request(
                out, raw=True, provider=_str(v.get("provider")), model=_str(v.get("modelId"))
            )
        elif t == "thinking_level_change":
            level = _str(v.get("thinkingLevel"))
            self.set_request(out, raw=True, params={"thinking_level": level})
        elif t == "compaction":
            vid = self._compaction(out, v, entry)
        elif t == "branch_summary" and v.get("summary") == "":
            self.raw_line("branch_summary", known=True)  # pi leaves an empty one out
        elif t == "branch_summary" and isinstance(v.get("summary"), str):
            parts = [text_part(_BRANCH.format(v["summary"]))]
            vid = self.message(out, "user/message", "user", parts, entry or f"pi-{self.n}")
        elif t == "custom_message":
            parts = pi_parts(v.get("content"))
            if parts:
                vid = self.message(out, "user/message", "user", parts, entry or f"pi-{self.n}")
        elif t == "session_info" and isinstance(v.get("name"), str) and v["name"].strip():
            out.target.title = title_of(v["name"])
            self._named = True
        if entry is not None and vid is not None:
            out.entry_vid[entry] = vid
        self._node = vid

    def _session(self, out: Out, v: dict[str, Any]) -> None:
        if out.target.meta.get("import"):
            return  # a second header (concatenated files): raw only
        version = v.get("version")
        self.version = version if type(version) is int else 1
        info: dict[str, Any] = {"format_version": self.version}
        if isinstance(v.get("id"), str):
            info["session"] = v["id"]
        for src in ("parentSession", "branchedFrom"):
            if isinstance(v.get(src), str):
                info["parent_session"] = v[src]
        out.target.meta["import"] = info
        out.target.agent = "pi"
        if isinstance(v.get("cwd"), str):
            out.target.cwd = v["cwd"]
        out.target.created = self.time or None
        self.set_request(
            out,
            raw=True,
            provider=_str(v.get("provider")),
            model=_str(v.get("modelId")),
            params={"thinking_level": _str(v.get("thinkingLevel"))},
        )

    def _message(self, out: Out, m: dict[str, Any], entry: str | None) -> int | None:
        role = m.get("role")
        msg_id = entry or f"pi-{self.n}"
        if role == "user":
            parts = pi_parts(m.get("content"))
            if out.turn is None:  # else a message the user queued while the agent worked
                self.start_turn(out)
            if not self._named:
                self.note_title(out, text_of(parts))
            return self.message(out, "user/message", "user", parts, msg_id)
        if role == "assistant":
            return self._assistant(out, m, msg_id)
        if role == "toolResult":
            call = m.get("toolCallId")
            if not isinstance(call, str):
                raise ValueError("a toolResult without a toolCallId")
            content = m.get("content")
            parts = pi_parts(content)
            response: Any = content
            if parts and all(p["type"] == "text" for p in parts):
                response = text_of(parts)
            return self.tool_result(
                out, call, response, is_error=m.get("isError") is True, msg_id=msg_id
            )
        if role == "bashExecution" and isinstance(m.get("command"), str):
            if m.get("excludeFromContext") is True:  # never sent to the model
                self.raw_line("message/bashExecution", known=True)
                return None
            text = bash_text(m)
            return self.message(
                out, "user/message", "user", [{"type": "text", "content": text}], msg_id
            )
        if role in ("custom", "hookMessage", "branchSummary", "compactionSummary"):
            content = m.get("content", m.get("summary"))
            if role in ("branchSummary", "compactionSummary") and isinstance(content, str):
                content = (_BRANCH if role == "branchSummary" else _COMPACTED).format(content)
            parts = pi_parts(content)
            if parts:
                return self.message(out, "user/message", "user", parts, msg_id)
        self.raw_line(f"message/{role}", known=False)
        return None

    def _assistant(self, out: Out, m: dict[str, Any], msg_id: str) -> int | None:
        if out.turn is None:  # the agent answers a message queued into the previous turn
            self.start_turn(out)
        g = self.group_for(out, msg_id)
        self.add_line(g)
        g.parts = pi_parts(m.get("content"))
        provider = _str(m.get("provider"))
        if provider:
            self.set_request(out, provider=provider)
        g.model = _str(m.get("model"))
        g.usage = renamed_usage(m.get("usage"), _USAGE)
        stop = m.get("stopReason")
        if isinstance(stop, str):
            g.extra["stop_reason"] = stop
        self.flush_group(out)
        reason = _STOP.get(stop) if isinstance(stop, str) else None
        if reason is not None and out.turn is not None:
            error = None
            if reason == "error":
                message = m.get("errorMessage")
                error = {"code": "error", "message": message if isinstance(message, str) else ""}
            self.end_turn(out, reason, error)
        return g.vid

    def _compaction(self, out: Out, v: dict[str, Any], entry: str | None) -> int | None:
        summary = v.get("summary")
        if not isinstance(summary, str):
            return None
        kept = v.get("firstKeptEntryId")
        index = v.get("firstKeptEntryIndex")
        nodes = out.surface.nodes
        kv: int | None = None
        if isinstance(kept, str):
            kv = self._entry_node(out, kept)
        elif type(index) is int and index >= 0:  # legacy v1: a position among the entries
            current = set(nodes)
            kv = next((n for n in self.entries[index:] if n in current), None)
        end: int | None = None
        if kv is not None and kv in nodes:
            i = nodes.index(kv)
            end = nodes[i - 1] if i > 0 else None
            if end is None:
                return None  # nothing before the first kept entry: nothing to replace
        tokens = v.get("tokensBefore")
        if self.start_compaction(
            out, "compaction", tokens if type(tokens) is int and tokens >= 0 else None, end=end
        ):
            return self.finish_compaction(
                out, summary, entry or f"pi-{self.n}", shown=_COMPACTED.format(summary)
            )
        return None


def bash_text(m: dict[str, Any]) -> str:
    """A user's ``!command`` as pi puts it in the model's context (``bashExecutionToText``):
    the command, its output fenced, then the cancellation or a non-zero exit code, and where a
    truncated output was saved."""
    output = m.get("output") if isinstance(m.get("output"), str) else ""
    text = f"Ran `{m['command']}`\n"
    text += f"```\n{output}\n```" if output else "(no output)"
    code = m.get("exitCode")
    if m.get("cancelled") is True:
        text += "\n\n(command cancelled)"
    elif type(code) is int and code != 0:
        text += f"\n\nCommand exited with code {code}"
    if m.get("truncated") is True and isinstance(m.get("fullOutputPath"), str):
        text += f"\n\n[Output truncated. Full output: {m['fullOutputPath']}]"
    return text


def _pi_entry(line: SourceLine) -> bool:
    """Whether pi counts a line the importer could not map as one of the file's entries: pi
    keeps every non-blank line that ``JSON.parse`` accepts (objects or not)."""
    if not line.raw.strip():
        return False
    try:
        json.loads(line.raw)
    except (ValueError, RecursionError):
        return False
    return True


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
