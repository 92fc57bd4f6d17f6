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
the model: except an ``info`` of ``inlineData``/``fileData`` parts, the binary data of a tool's
response that the CLI sends as a message of its own, a ``user/message``), the metadata line and
other ``$set`` s are raw only. Gemini CLI never marks the end
of a turn: the next prompt (or a finished source) ends it.

Current Gemini CLI also records each tool response it sends as a ``user`` record of
``functionResponse`` parts (``recordSyntheticMessage``): not a prompt; a response whose call has
no result on the tape yet becomes its ``tool/result``, other parts a ``user/message`` of the
running turn. A ``$set`` with a ``messages`` list is a checkpoint (``updateMessagesFromHistory``
after a compression, a masking of tool outputs, a rolled-back failed stream):
``loadConversationRecord`` clears the messages and rebuilds them from the list, so the messages
from the first one the list changes (or drops) on are retracted (reason ``checkpoint``) and the
rest of the list is mapped as records.

The legacy whole-file ``session-*.json`` (one pretty-printed ``ConversationRecord``
``{sessionId, projectHash, startTime, lastUpdated, messages, summary?, directories?, kind?}``,
rewritten whole on every change; Gemini CLI migrates it to ``.jsonl`` when it is resumed) is
read as the same records (:func:`legacy_unit`): the metadata without what changes on every save,
each message, then ``{"$set": {summary, lastUpdated}}``. Until the file is settled its last
message and that ``$set`` are held back: the CLI may still rewrite them. A file nested deeper
than a JSONL line may be (``_source.MAX_DEPTH``) is refused whole, naming the byte.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeGuard

from ..errors import FormatError
from ._agent import Agent, Home
from ._base import Group, Mapper, Out, title_of
from ._document import read_document, render_records
from ._parts import (
    genai_parts,
    genai_response,
    reasoning_part,
    renamed_usage,
    text_of,
    tool_call_part,
)
from ._source import Unit, parse_time
from ._tools import result_data

__all__ = ["AGENTS", "GeminiMapper", "legacy_unit"]

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


def _injected(v: dict[str, Any]) -> bool:
    """Whether an ``info`` record holds media Gemini CLI sends the model: the binary data a
    tool returned (``extractBinaryInjections``), recorded as ``info`` after the response."""
    content = v.get("content")
    return (
        v.get("type") == "info"
        and isinstance(content, list)
        and any(isinstance(p, dict) and ("inlineData" in p or "fileData" in p) for p in content)
    )


def _is_response(part: Any) -> TypeGuard[dict[str, Any]]:
    """Whether a content part is a tool response (``{functionResponse: {...}}``)."""
    return isinstance(part, dict) and isinstance(part.get("functionResponse"), dict)


def _view(v: dict[str, Any]) -> tuple[Any, ...]:
    """What a record gives the history: its id and type, the text and media of its content
    (a synced record carries the model's own parts: thoughts and calls beside the text) and
    its calls with their results."""
    parts = [p for p in genai_parts(v.get("content")) if p["type"] != "reasoning"]
    calls = v.get("toolCalls") if v.get("type") == "gemini" else None
    shown = [
        (c.get("id"), c.get("args"), c.get("result"), c.get("status"))
        for c in calls if isinstance(c, dict)
    ] if isinstance(calls, list) else []  # fmt: skip
    content = v.get("content")
    responses = [
        p["functionResponse"] for p in content if _is_response(p)
    ] if isinstance(content, list) else []  # fmt: skip
    return v["id"], v.get("type"), parts, shown, responses


def _sent(v: dict[str, Any]) -> bool:
    """Whether a record is part of the history Gemini CLI sends (not a note for the user)."""
    return v.get("type") in ("user", "gemini") or _injected(v)


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
        #: the messages as ``loadConversationRecord`` holds them: id -> last record, in order
        self.msgs: dict[str, dict[str, Any]] = {}
        #: the tool/result of each answered call
        self.results: dict[str, int] = {}
        #: the surface node before each message that made no node (a tool response already
        #: answered): a rewind to it drops what came after that node
        self.marks: dict[str, int | None] = {}
        #: calls whose result a rewind or checkpoint voided (``_void``): a response sent again
        #: for one of them is its result again
        self.voided: set[str] = set()

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
            messages = v["$set"].get("messages")
            if isinstance(messages, list):
                self._checkpoint(out, messages)
            if not self._claimed:  # else the line is on the first event the checkpoint made
                self.raw_line("$set", known=True)
        elif isinstance(v.get("id"), str):
            self._record(out, v)
        elif isinstance(v.get("sessionId"), str):
            self.time = parse_time(v.get("startTime")) or self.time  # the record's own time
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

    def _record(self, out: Out, v: dict[str, Any]) -> None:
        """A ``MessageRecord``: the last one with an id wins, in the place of its first."""
        self.time = parse_time(v.get("timestamp")) or self.time
        t, mid = v.get("type"), v["id"]
        self.msgs[mid] = v
        if t == "user":
            self._user(out, v)
        elif t == "gemini":
            self._gemini(out, v)
        elif _injected(v):  # the binary data of a tool's response, sent as the next message
            parts = genai_parts(v.get("content"))
            self.nodes[mid] = self.message(out, "user/message", "user", parts, mid)
        else:
            nodes = out.surface.nodes
            self.marks.setdefault(mid, nodes[-1] if nodes else None)
            self.raw_line(str(t), known=t in _UI_ONLY)

    def _user(self, out: Out, v: dict[str, Any]) -> None:
        mid = v["id"]
        if mid in self.nodes and out.surface.is_current(self.nodes[mid]):
            self.raw_line("user", known=True)  # the same prompt again (a history sync)
            return
        content = v.get("content")
        items = content if isinstance(content, list) else [content]
        responses = [p["functionResponse"] for p in items if _is_response(p)]
        if responses:
            self._tool_response(out, mid, responses, items)
            return
        parts = genai_parts(content)
        self.start_turn(out)
        if not self._named:
            self.note_title(out, text_of(parts))
        self.nodes[mid] = self.message(out, "user/message", "user", parts, mid)

    def _tool_response(
        self, out: Out, mid: str, responses: list[dict[str, Any]], items: list[Any]
    ) -> None:
        """The tool responses Gemini CLI sent, recorded as a user message: results of calls
        not answered yet (the call's record usually has them already), then other parts."""
        last = out.surface.nodes[-1] if out.surface.nodes else None
        first: int | None = None
        for k, r in enumerate(responses):
            call = r.get("id")
            msg_id = f"{mid}#{k}" if k else mid
            if isinstance(call, str) and call in self.voided:
                vid = self._unvoid(out, call, genai_response([{"functionResponse": r}]), msg_id)
                first = vid if first is None else first
                continue
            if not isinstance(call, str) or call in self.answered:
                continue
            self.answered.add(call)
            vid = self.tool_result(
                out, call, genai_response([{"functionResponse": r}]), is_error=False,
                msg_id=msg_id, tag=f"result:{call}",
            )  # fmt: skip
            self.results[call] = vid
            first = vid if first is None else first
        others = [p for p in items if not _is_response(p)]
        parts = genai_parts(others)
        if parts:
            vid = self.message(out, "user/message", "user", parts, mid, tag="parts")
            first = vid if first is None else first
        if first is not None:
            self.nodes[mid] = first
        else:
            self.marks[mid] = last
            if not self._claimed:
                self.raw_line("user", known=True)  # every response is on the tape already

    def _checkpoint(self, out: Out, messages: list[Any]) -> None:
        """A synced ``messages`` list: keep the messages up to the first one it changes, retract
        the rest, map the list from there (``loadConversationRecord`` rebuilds from it)."""
        records = [
            m for m in messages
            if isinstance(m, dict) and isinstance(m.get("id"), str) and _sent(m)
        ]  # fmt: skip
        ids = list(self.msgs)
        held = [(mid, v) for mid, v in self.msgs.items() if _sent(v)]  # UI notes are not history
        k = 0
        while k < len(records) and k < len(held) and _view(held[k][1]) == _view(records[k]):
            k += 1
        if k == len(records) and k == len(held):
            return  # nothing changed
        if k < len(held) and not self._drop(out, ids[ids.index(held[k][0]) :], "checkpoint"):
            return  # refused (reported): the list is not mapped onto a surface left uncut
        for r in records[k:]:
            self._record(out, r)

    def _node_of(self, mid: str) -> int | None:
        g = self.groups.get(mid)
        return g.vid if g is not None else self.nodes.get(mid)

    def _drop(self, out: Out, ids: list[str], reason: str) -> bool:
        """Retract the surface from the first node the messages ``ids`` made on, and forget
        them (a later record with one of their ids maps afresh); False (reported) when the
        surface rules refuse it, and then nothing is dropped."""
        self.end_turn(out, "completed", tag=f"{reason}:end")
        self.flush_group(out)
        nodes = out.surface.nodes
        start: int | None = None
        for mid in ids:
            vid = self._node_of(mid)
            if vid is not None and vid in nodes:
                start = nodes.index(vid)
                break
            if mid in self.marks:  # made no node: what came after the node before it
                mark = self.marks[mid]
                start = nodes.index(mark) + 1 if mark in nodes else (0 if mark is None else None)
                if start is not None:
                    break
        after = nodes[start:] if start is not None else []
        if after and not self._retract(out, after, reason, reason):
            # What is dropped starts with the only results of calls that stay (Gemini CLI's
            # history then holds the calls without their responses): those results are voided
            # in place, as a closed turn's unanswered calls are (§10.3), and the rest retracted.
            # Everything is checked before anything is written: voiding changes no call's
            # pairing, so the rest's retraction is judged on the surface as it is.
            k = 0
            while k < len(after) and out.types.get(after[k]) == "tool/result":
                k += 1
            calls = [self._voidable(out, v, reason) for v in after[:k]]
            rest = after[k:]
            if not k or None in calls or (rest and self.refusal(out, rest) is not None):
                self.problems.append(
                    (self.n, f"{reason}: the surface rules refuse dropping what follows")
                )
                return False
            for v, call in zip(after[:k], calls, strict=True):
                assert call is not None
                self._void(out, v, call, reason)
            self._retract(out, rest, reason, f"{reason}:rest")
        for mid in ids:
            self.msgs.pop(mid, None)
            self.groups.pop(mid, None)
            self.nodes.pop(mid, None)
            self.marks.pop(mid, None)
        current = out.surface.is_current
        self.answered = {
            c for c in self.answered if c not in self.results or current(self.results[c])
        }
        self.voided = {c for c in self.voided if c in self.answered}
        return True

    def _retract(self, out: Out, nodes: list[int], reason: str, tag: str) -> bool:
        """Retract ``nodes`` (a run of the surface; none: nothing to do); False if refused."""
        if nodes and self.refusal(out, nodes) is not None:
            return False
        if nodes:
            self.retract(out, nodes, reason, tag)
        return True

    @staticmethod
    def _void_result(call: str, reason: str) -> dict[str, Any]:
        """The error result that takes a dropped result's place (``tool_result`` arguments)."""
        text = f"the session's {reason} dropped this tool result"
        return {
            "response": text,
            "is_error": True,
            "msg_id": f"{reason}-{call}",
            "extra": {"error": {"code": "TOOL_RESULT_DROPPED", "message": text}, "synthetic": True},
        }

    def _voidable(self, out: Out, vid: int, reason: str) -> str | None:
        """The call of the tool result ``vid`` if the surface takes a void in its place."""
        call = out.data[vid].get("call_id")
        if not isinstance(call, str):
            return None
        ok = self.replaceable(out, vid, result_data(call, **self._void_result(call, reason)))
        return call if ok else None

    def _void(self, out: Out, vid: int, call: str, reason: str) -> None:
        self.results[call] = self.tool_result(
            out, call, **self._void_result(call, reason), tag=f"{reason}:void:{call}",
            replaces=vid, raw=False,
        )  # fmt: skip
        self.voided.add(call)

    def _unvoid(self, out: Out, call: str, response: Any, msg_id: str) -> int | None:
        """A response sent again for a call whose result was voided: its result again, in
        place of the void (None if the surface refuses)."""
        old = self.results.get(call)
        given = {"response": response, "is_error": False, "msg_id": msg_id, "extra": None}
        if old is None or not out.surface.is_current(old):
            return None
        if not self.replaceable(out, old, result_data(call, **given)):
            return None
        self.results[call] = vid = self.tool_result(
            out, call, **given, tag=f"result:{call}:again", replaces=old
        )
        self.voided.discard(call)
        return vid

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
        parts.extend(genai_parts(v.get("content")))
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
            self.results[c["id"]] = self.tool_result(
                out,
                c["id"],
                genai_response(c["result"]),
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
        ids = list(self.msgs)
        ids = ids[ids.index(mid) :] if mid in self.msgs else ids
        self._drop(out, ids, "rewind")
        if not self._claimed:
            self.raw_line("$rewindTo", known=True)


def legacy_unit(path: Path) -> Unit:
    """A legacy whole-file chat (``session-*.json``) as a :class:`Unit` of JSONL records."""
    st = os.stat(path, follow_symlinks=False)

    def render(settled: bool) -> tuple[bytes, int]:
        value = read_document(path, "Gemini CLI chat", "chat")
        if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
            raise FormatError(
                "not a Gemini CLI chat: not an object with a messages list", path=path
            )
        if not isinstance(value.get("sessionId"), str) or not isinstance(
            value.get("projectHash"), str
        ):
            raise FormatError("not a Gemini CLI chat: no sessionId and projectHash", path=path)
        records: list[Any] = [{k: value[k] for k in _LEGACY_META if k in value}]
        records.extend(value["messages"])
        held = 1 if len(records) > 1 else 0  # the last message may still be rewritten
        changes = {k: value[k] for k in _LEGACY_SET if k in value}
        if changes:
            records.append({"$set": changes})
            held += 1
        return render_records(records, held, settled)

    return Unit(str(path), path.name, st.st_size, st.st_mtime_ns, render)


def _legacy(path: Path) -> bool:
    return path.name.startswith("session-") and path.name.endswith(".json")


def _wanted(path: Path) -> bool:
    return path.name.endswith(".jsonl") or _legacy(path)


def _units(path: Path) -> list[Unit] | None:
    return [legacy_unit(path)] if _legacy(path) and path.is_file() else None


def _migrated(path: Path) -> str | None:
    if _legacy(path) and path.with_name(f"{path.name}l").exists():
        return f"migrated by Gemini CLI to {path.name}l, which is imported"
    return None


AGENTS = (
    Agent(
        "gemini-cli",
        "Gemini CLI",
        GeminiMapper,
        (Home(("linux", "darwin", "win32"), "~/.gemini/tmp"),),
        "*.jsonl, session-*.json",
        _wanted,
        units=_units,
        skip=_migrated,
    ),
)
