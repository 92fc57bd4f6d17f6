"""Qwen Code chat records (``~/.qwen/projects/<project>/chats/<session>.jsonl``) to jsonltape.

The format is the one Qwen Code's ``ChatRecordingService`` appends (QwenLM/qwen-code
packages/core/src/services/chatRecordingService.ts, ``ChatRecord``): one JSON object per line,
``{uuid, parentUuid, sessionId, timestamp, type, subtype?, cwd, version, gitBranch?, message?,
usageMetadata?, model?, toolCallResult?, systemPayload?, isSidechain?, agentId?, ...}``, where
``message`` is the Google GenAI ``Content`` sent or received (``{role: "user"|"model", parts}``).
The records form a tree by ``parentUuid``; Qwen Code resumes the branch that ends at the last
record, and its model history (``buildApiHistoryFromConversation``,
services/session-api-history.ts) is the ``message`` of each record on it, from the latest
``chat_compression`` checkpoint's ``compressedHistory`` on.

Mapping (each source line is kept verbatim on the event it produced, else as ``import/raw``):

* ``user`` without subtype (and ``cron``): a prompt, ``user/message`` starting a turn (text,
  ``inlineData`` → blob, ``fileData`` → uri; the hook context Qwen Code appends is part of what
  the model read); the title is what the user typed (``systemPayload.displayText``) unless a
  ``custom_title`` names the session. Other ``user`` records with a message
  (``mid_turn_user_message``, ``notification``, ``at_command``): a ``user/message`` of the
  running turn. ``realtime_message`` (never sent) stays raw.
* ``assistant`` (one record per model response): ``assistant/message`` (``thought`` parts →
  reasoning, text, ``functionCall`` → tool_call), ``model``, ``usage`` from ``usageMetadata``;
  a ``tool/call`` per call. A later record with the same ``uuid`` adds to that message (Qwen
  Code aggregates the records of one uuid), revising it in place once it was emitted.
* ``tool_result``: a ``tool/result`` per ``functionResponse`` part (``toolCallResult.status``
  ``error`` or ``cancelled`` → ``is_error``), other parts a ``user/message``.
* ``system``/``chat_compression`` ``{compressedHistory}``: a compaction of the whole surface;
  the history Qwen Code continues from takes its place, each ``Content`` the message it is.
* ``system``/``custom_title`` titles the session (the latest wins: Qwen Code appends it again
  every 32 KiB); ``parent_session`` ``{parentSessionId}`` (a ``create_sub_session`` child) is
  kept as ``meta.import.sidechain_of``; ``slash_command`` with a result the model was not sent
  (``sentToModel`` not true, assistant output only) retracts the command's prompt, as Qwen
  Code drops it from the history; every other system record stays raw.
* Records with ``isSidechain: true`` and an ``agentId`` (a sub-agent writing into the parent's
  file): a session of their own per agent, forked from the main one at seq 0.
* A record continuing from an earlier one than the last (a rewind, a branch): the abandoned
  messages are retracted. Qwen Code never marks a turn's end: the next prompt (or a finished
  source) ends it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._agent import Agent, Home
from ._base import Group, Mapper, Out, title_of
from ._parts import (
    genai_parts,
    genai_response,
    renamed_usage,
    text_of,
    tool_call_part,
)
from ._source import parse_time

__all__ = ["AGENTS", "QwenMapper"]

#: ``usageMetadata`` (Google GenAI ``GenerateContentResponseUsageMetadata``) under the names
#: the Gemini CLI import gives it: ``input_tokens`` includes the cached content.
_TOKENS = (
    ("promptTokenCount", "input_tokens"),
    ("candidatesTokenCount", "output_tokens"),
    ("cachedContentTokenCount", "cache_read_input_tokens"),
    ("thoughtsTokenCount", "reasoning_tokens"),
    ("toolUsePromptTokenCount", "tool_use_prompt_tokens"),
    ("totalTokenCount", "total_tokens"),
)
_ERROR_STATUS = frozenset({"error", "cancelled"})
#: Records Qwen Code never puts in the model's history (``SessionApiHistoryAccumulator``).
_NOT_SENT = frozenset({"realtime_message", "code_mode_tool_result"})
#: User records that start a turn: a prompt the user typed, or a scheduled one.
_PROMPTS = frozenset({None, "cron"})


def _responses(parts: list[Any]) -> list[dict[str, Any]]:
    return [
        p["functionResponse"]
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
    ]


def model_parts(parts: list[Any]) -> list[dict[str, Any]]:
    """The parts of a ``model`` Content in order: text and thoughts, and each
    ``functionCall`` as a tool_call (a call without an id cannot be paired: ValueError)."""
    out: list[dict[str, Any]] = []
    for p in parts:
        call = p.get("functionCall") if isinstance(p, dict) else None
        if isinstance(call, dict):
            if not isinstance(call.get("id"), str) or not call["id"]:
                raise ValueError("a functionCall without an id")
            args = call.get("args")
            out.append(tool_call_part(call["id"], str(call.get("name")), args))
        else:
            out.extend(genai_parts([p]))
    return out


class QwenMapper(Mapper):
    source = "qwen-code"
    known_raw = frozenset({"system/", "user/realtime_message", "tool_result/code_mode_tool_result"})
    implicit_end = True

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = "qwen-code"
        #: (session, record uuid) -> the assistant message of that uuid
        self.groups: dict[tuple[str, str], Group] = {}
        #: per session: the node and text of the latest prompt (what a slash command drops)
        self.prompts: dict[str, tuple[int, str]] = {}
        self._named = False

    def sniff(self, value: dict[str, Any]) -> str | None:
        if "payload" in value:
            return "this looks like a Codex rollout (use --from codex)"
        message = value.get("message")
        if isinstance(message, dict) and "content" in message and "parts" not in message:
            return "this looks like a Claude Code transcript (use --from claude-code)"
        if (
            isinstance(value.get("uuid"), str)
            and isinstance(value.get("sessionId"), str)
            and value.get("type") in ("user", "assistant", "tool_result", "system")
        ):
            return None
        return "not a Qwen Code chat record (no uuid, sessionId and record type)"

    def handle(self, v: dict[str, Any]) -> None:
        self.time = parse_time(v.get("timestamp")) or self.time
        self._header(v)
        t, sub = v.get("type"), v.get("subtype")
        uuid = v.get("uuid") if isinstance(v.get("uuid"), str) else None
        parent = v.get("parentUuid") if isinstance(v.get("parentUuid"), str) else None
        out = self._out_of(v)
        message = v.get("message")
        parts = message.get("parts") if isinstance(message, dict) else None
        if t == "system" or not isinstance(parts, list) or sub in _NOT_SENT:
            self.branch_to(out, parent, uuid, message=False)
            if t == "system":
                self._system(out, v, sub)
            return
        self.branch_to(out, parent, uuid)
        if t == "assistant":
            self._assistant(out, v, parts, uuid or f"line-{self.n}")
        elif t == "tool_result":
            self._results(out, v, parts, uuid or f"line-{self.n}")
        elif t == "user":
            self._user(out, v, parts, uuid or f"line-{self.n}", sub)

    # -- the session --------------------------------------------------------------------

    def _header(self, v: dict[str, Any]) -> None:
        target = self.main.target
        info = target.meta.setdefault("import", {})
        if "session" not in info and isinstance(v.get("sessionId"), str):
            info["session"] = v["sessionId"]
        if "version" not in info and isinstance(v.get("version"), str):
            info["version"] = v["version"]
            target.agent = f"qwen-code/{v['version']}"
        if target.cwd is None and isinstance(v.get("cwd"), str) and v["cwd"]:
            target.cwd = v["cwd"]
        if "git_branch" not in info and isinstance(v.get("gitBranch"), str) and v["gitBranch"]:
            info["git_branch"] = v["gitBranch"]
        forked = v.get("forkedFrom")
        if isinstance(forked, dict) and isinstance(forked.get("sessionId"), str):
            info.setdefault("forked_from", forked["sessionId"])
        if target.created is None and self.time:
            target.created = self.time

    def _out_of(self, v: dict[str, Any]) -> Out:
        """The main session, or a sub-agent's (``isSidechain`` records with an ``agentId``)."""
        agent = v.get("agentId")
        if v.get("isSidechain") is not True or not isinstance(agent, str) or not agent:
            return self.main
        out = self.outs.get(f"sidechain-{agent}")
        if out is None:
            meta: dict[str, Any] = {"agent_id": agent}
            if isinstance(v.get("sessionId"), str):
                meta["session"] = v["sessionId"]
            if isinstance(v.get("agentName"), str):
                meta["agent_name"] = v["agentName"]
            message = v.get("message")
            parts = message.get("parts") if isinstance(message, dict) else None
            prompt = text_of(genai_parts(parts)) if v.get("type") == "user" else None
            out = self.side_out(agent, meta, prompt)
        return out

    def _system(self, out: Out, v: dict[str, Any], sub: Any) -> None:
        payload = v.get("systemPayload")
        payload = payload if isinstance(payload, dict) else {}
        if sub == "chat_compression" and isinstance(payload.get("compressedHistory"), list):
            self._compression(out, payload["compressedHistory"])
        elif sub == "custom_title" and out is self.main:
            title = payload.get("customTitle")
            if isinstance(title, str) and title.strip():
                out.target.title = title_of(title)
                self._named = True
        elif sub == "parent_session" and out is self.main:
            parent = payload.get("parentSessionId")
            info = out.target.meta.setdefault("import", {})
            if isinstance(parent, str) and parent and "sidechain_of" not in info:
                info["sidechain_of"] = parent
        elif sub == "slash_command":
            self._slash_result(out, payload)

    def _slash_result(self, out: Out, payload: dict[str, Any]) -> None:
        """A local command's output the model was not sent: Qwen Code drops the command's own
        prompt from the history too (when it is the latest message and just the command)."""
        items = payload.get("outputHistoryItems")
        if (
            payload.get("phase") != "result"
            or payload.get("sentToModel") is True
            or not isinstance(items, list)
            or not items
            or not all(isinstance(i, dict) and i.get("type") == "assistant" for i in items)
        ):
            return
        latest = self.prompts.get(out.target.name)
        nodes = out.surface.nodes
        if latest is None or not nodes or nodes[-1] != latest[0]:
            return
        if latest[1] != payload.get("rawCommand") or self.refusal(out, [latest[0]]) is not None:
            return
        self.retract(out, [latest[0]], "slash_command", "slash")

    def _compression(self, out: Out, history: list[Any]) -> None:
        """Qwen Code continues from ``compressedHistory``: it takes the surface's place."""
        contents = [c for c in history if isinstance(c, dict)]
        summary = "\n\n".join(
            t for t in (text_of(genai_parts(c.get("parts"))) for c in contents) if t
        )
        base = f"{self.n}"

        def items() -> None:
            for k, c in enumerate(contents):
                given = c.get("parts")
                parts: list[Any] = given if isinstance(given, list) else []
                if c.get("role") == "model":
                    g = self.group_for(out, f"{base}.{k}")
                    self.add_line(g)
                    g.parts.extend(model_parts(parts))
                else:
                    self._results(out, {}, parts, f"{base}.{k}")

        self.replace_history(out, "compressed", summary, items)

    # -- messages -------------------------------------------------------------------------

    def _user(self, out: Out, v: dict[str, Any], parts: list[Any], uuid: str, sub: Any) -> None:
        if _responses(parts):  # tool responses sent in a user record: results, not a prompt
            self._results(out, v, parts, uuid)
            return
        mapped = genai_parts(parts)
        if not mapped:
            self.raw_line(f"user/{sub}" if isinstance(sub, str) else "user", known=True)
            return  # nothing the model reads
        if sub in _PROMPTS:
            self.start_turn(out)
            payload = v.get("systemPayload")
            shown = payload.get("displayText") if isinstance(payload, dict) else None
            if not self._named:
                self.note_title(out, shown if isinstance(shown, str) else text_of(mapped))
        elif out.turn is None:
            self.start_turn(out)
        vid = self.message(out, "user/message", "user", mapped, uuid)
        out.entry_vid[uuid] = vid
        if sub in _PROMPTS:
            self.prompts[out.target.name] = (vid, text_of(mapped))

    def _assistant(self, out: Out, v: dict[str, Any], parts: list[Any], uuid: str) -> None:
        key = (out.target.name, uuid)
        g = self.groups.get(key)
        if g is not None and out.group is not g:
            if g.vid is None or not out.surface.is_current(g.vid):
                self.raw_line("assistant", known=True)  # its message left the surface
                return
            self.flush_group(out)
            out.group = g  # the same uuid again: Qwen Code aggregates it into that message
        else:
            if out.turn is None:
                self.start_turn(out)
            g = self.group_for(out, uuid)
            self.groups[key] = g
        self.add_line(g, uuid)
        out.entry_group[uuid] = g
        g.parts.extend(model_parts(parts))
        if isinstance(v.get("model"), str) and v["model"]:
            g.model = v["model"]
        usage = renamed_usage(v.get("usageMetadata"), _TOKENS, ints_only=True)
        if usage:
            g.usage = usage
        self.flush_group(out)  # a record is a whole response: emitted at its own time

    def _results(self, out: Out, v: dict[str, Any], parts: list[Any], uuid: str) -> None:
        """The ``functionResponse`` parts as ``tool/result`` s, other parts a ``user/message``."""
        info = v.get("toolCallResult")
        status = info.get("status") if isinstance(info, dict) else None
        first: int | None = None
        for k, r in enumerate(_responses(parts)):
            call = r.get("id")
            if not isinstance(call, str) or not call:
                raise ValueError("a functionResponse without an id")
            vid = self.tool_result(
                out, call, genai_response([{"functionResponse": r}]),
                is_error=status in _ERROR_STATUS, msg_id=uuid if k == 0 else f"{uuid}#{k}",
                tag=f"result:{k}" if k else None,
                extra={"status": status} if isinstance(status, str) else None,
            )  # fmt: skip
            first = vid if first is None else first
        others = [p for p in parts if not (isinstance(p, dict) and "functionResponse" in p)]
        mapped = genai_parts(others)
        if mapped:
            vid = self.message(out, "user/message", "user", mapped, uuid, tag="parts")
            first = vid if first is None else first
        if first is not None:
            out.entry_vid[uuid] = first


def _chat(path: Path) -> bool:
    """``<project>/chats/<session>.jsonl``."""
    return path.name.endswith(".jsonl") and path.parent.name == "chats"


_QWEN = "${QWEN_RUNTIME_DIR:-~/.qwen}"
AGENTS = (
    Agent(
        "qwen-code",
        "Qwen Code",
        QwenMapper,
        (
            Home(("linux", "darwin", "win32"), f"{_QWEN}/projects"),
            Home(("linux", "darwin", "win32"), f"{_QWEN}/tmp"),
        ),
        "chats/*.jsonl",
        _chat,
    ),
)
