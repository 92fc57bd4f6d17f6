"""Claude Code sessions (``~/.claude/projects/<cwd>/<session>.jsonl``) to jsonltape.

Mapping (each source line is kept verbatim on the event it produced, else as ``import/raw``):

* ``user`` lines: ``tool_result`` blocks become ``tool/result`` events paired by
  ``tool_use_id``; other content becomes a ``user/message`` (text, images as blob/uri parts,
  unknown blocks kept as parts of their own type). A prompt (not ``isMeta``, not a compact
  summary, not only tool results) starts a turn and closes the previous one;
  ``[Request interrupted by user…]`` ends the turn as ``aborted``.
* ``assistant`` lines: Claude Code writes one API response as several lines sharing
  ``message.id`` (one per content block, each repeating ``usage``). They are merged into one
  ``assistant/message`` with the parts in order and the usage of the last line, so usage is
  counted once; text, ``thinking`` (reasoning with its signature), ``tool_use`` (tool_call).
  Each tool call also gets a ``tool/call``; ``TodoWrite`` calls a ``todo/write``. Claude Code
  2.x runs a tool while the response is still streaming and may write its result line
  *between* the response's lines: a line holding only results of the response's calls is held
  back until the response is complete, so the response stays one message and its results
  follow it. A line after such a result continues the response only when it provably is the
  same one (same ``requestId`` and input usage, :func:`same_response`): a model or proxy that
  reuses message ids gives the next response the same id.
* ``system/compact_boundary`` + the next ``isCompactSummary`` user line: ``compaction/start``,
  ``compaction/summary`` (with the file ledger), the summary ``user/message`` replacing the
  surface, ``compaction/end``.
* Sidechains (``isSidechain``, Task sub-agents interleaved in the file): one session each,
  forked from the main session at seq 0 (they inherit none of its messages), with the spawning
  Task call id in ``meta.import.spawned_by`` when the prompt matches.
* Rewinds (a line whose ``parentUuid`` is an earlier line, not the last one): the abandoned
  messages are retracted (``surface/retract``), so the surface is the branch Claude Code resumes.
* ``system/microcompact_boundary`` ``{microcompactMetadata: {compactedToolIds, ...}}``:
  Claude Code clears the content of those older tool results in what it sends from then on;
  each one on the surface is replaced in place by a ``tool/result`` whose response is the
  placeholder the model sees (``data.cleared``: ``microcompact``).
* ``summary``, ``ai-title``, ``last-prompt``, ``atis-latch``, ``file-history-snapshot``,
  ``progress``, ``queue-operation``, ``attachment``, other ``system`` lines, ...: ``import/raw``
  only. The model of each response goes to a ``request/header`` when it changes.
"""

from __future__ import annotations

import re
from typing import Any

from ._agent import Agent, Home, jsonl
from ._base import Group, Mapper, Out, title_of
from ._model import call_ids
from ._parts import (
    ANTHROPIC,
    anthropic_assistant_parts,
    anthropic_result,
    anthropic_user_parts,
    text_of,
)
from ._source import SourceLine, parse_time

__all__ = ["AGENTS", "ClaudeCodeMapper"]

_KNOWN_RAW = frozenset(
    {
        "summary",
        "ai-title",
        "custom-title",
        "last-prompt",
        "atis-latch",
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "attachment",
        "pr-link",
        "agent-setting",
        "tag",
        "system/",
    }
)
_STATUSES = ("pending", "in_progress", "completed")
#: What Claude Code sends in place of a tool result a microcompaction cleared.
CLEARED_TEXT = "[Old tool result content cleared]"


#: The input side of a response's usage: the same on every line of one response (Claude Code
#: writes the usage it got at the response's start on each), different for the next response
#: (its input holds the first one's output and the tool results).
_INPUT_USAGE = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def same_response(g: Group, v: dict[str, Any]) -> bool:
    """Whether the assistant line ``v``, written after results of the calls of the response
    ``g`` with the same ``message.id``, is a line of that response (Claude Code 2.x runs tools
    while a response streams) rather than the next response, from a model or proxy that reuses
    message ids. The API request id proves it: the lines share a ``requestId`` (and their input
    usage, when both have one, is the same). Without request ids (a provider or proxy that
    gives none), only the same non-zero input usage on both does: the next response's input
    holds the first one's output and the tool results."""
    request, earlier = v.get("requestId"), g.extra.get("request_id")
    usage, first = v["message"].get("usage"), g.usage
    inputs = [
        tuple(u.get(k) for k in _INPUT_USAGE) if isinstance(u, dict) else None
        for u in (usage, first)
    ]
    if isinstance(request, str) or isinstance(earlier, str):
        return request == earlier and (None in inputs or inputs[0] == inputs[1])
    return inputs[0] is not None and inputs[0] == inputs[1] and any(inputs[0])


_TAG = re.compile(r"<(command-name|command-args)>(.*?)</\1>", re.S)


def command_title(text: str) -> str:
    """A slash command prompt (``<command-name>/x</command-name><command-args>y…``) as
    ``/x y``; other text as it is."""
    found = dict((m.group(1), m.group(2).strip()) for m in _TAG.finditer(text))
    if "command-name" not in found:
        return text
    return f"{found['command-name']} {found.get('command-args', '')}".strip()


class ClaudeCodeMapper(Mapper):
    source = "claude-code"
    known_raw = _KNOWN_RAW
    implicit_end = True

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        #: A sub-agent transcript file (agent-*.jsonl) is one sidechain: no split by root.
        self.flat = name.startswith("agent-")
        self.root_of: dict[str, str] = {}  # uuid -> sidechain root uuid ("" for main)
        self.task_prompts: dict[str, str] = {}  # Task prompt -> call id
        self.session: str | None = None
        self._titled = False
        #: per session: result-only user lines held back while the response they answer is
        #: still streaming (the line, its time, the value and its uuid)
        self._held: dict[str, list[tuple[SourceLine, int, dict[str, Any], str | None]]] = {}
        #: per session: the tool/result of each call id (what a microcompaction clears)
        self._results: dict[tuple[str, str], int] = {}

    def sniff(self, value: dict[str, Any]) -> str | None:
        t = value.get("type")
        if t == "session_meta" or "payload" in value:
            return "this looks like a Codex rollout (use --from codex)"
        if t == "session" and "cwd" in value and "uuid" not in value:
            return "this looks like a pi session (use --from pi)"
        message = value.get("message")
        if isinstance(message, dict) and "parts" in message and "content" not in message:
            return "this looks like a Qwen Code chat (use --from qwen-code)"
        if not isinstance(t, str) or not (
            "uuid" in value or "sessionId" in value or t in _KNOWN_RAW
        ):
            return "not a Claude Code transcript line (no type/uuid/sessionId)"
        return None

    # -- lines ----------------------------------------------------------------------------

    def handle(self, v: dict[str, Any]) -> None:
        snapshot = v.get("snapshot")  # a file-history-snapshot has its time there
        own = v.get("timestamp") or (
            snapshot.get("timestamp") if isinstance(snapshot, dict) else None
        )
        self.time = parse_time(own) or self.time
        self._header(v)
        t = v.get("type")
        uuid = v.get("uuid") if isinstance(v.get("uuid"), str) else None
        parent = v.get("parentUuid") if isinstance(v.get("parentUuid"), str) else None
        if t in ("user", "assistant") and isinstance(v.get("message"), dict):
            out = self._out_of(v, uuid, parent)
            if not self._continues(out, v):
                self._release(out)
            self.branch_to(out, parent, uuid)
            if t == "assistant":
                self._assistant(out, v, uuid)
            elif self._continues(out, v) and self.line is not None:
                # answers a call of the response still being written: after that response
                self._held.setdefault(out.target.name, []).append((self.line, self.time, v, uuid))
                self._claimed = True  # its tool/result carries the line when released
            else:
                self._release(out)
                self._user(out, v, uuid)
            return
        out = self._out_of(v, uuid, parent) if uuid else self.main
        self.branch_to(out, parent, uuid, message=False)
        if t == "system" and v.get("subtype") == "compact_boundary":
            self._release(out)
            meta = v.get("compactMetadata")
            meta = meta if isinstance(meta, dict) else {}
            tokens = meta.get("preTokens")
            trigger = meta.get("trigger")
            self.start_compaction(
                out,
                trigger if isinstance(trigger, str) else "compact",
                tokens if type(tokens) is int and tokens >= 0 else None,
            )
        elif t == "system" and v.get("subtype") == "microcompact_boundary":
            self._release(out)
            meta = v.get("microcompactMetadata")
            ids = meta.get("compactedToolIds") if isinstance(meta, dict) else None
            if not isinstance(ids, list):
                raise ValueError("microcompact_boundary: compactedToolIds is not a list")
            for call in ids:
                if isinstance(call, str):
                    self._clear_result(out, call)
        elif t in ("summary", "ai-title", "custom-title"):
            text = v.get("summary") or v.get("aiTitle") or v.get("customTitle") or v.get("title")
            if isinstance(text, str) and text.strip() and not self._titled:
                self.main.target.title = title_of(text)
                self._titled = t != "summary"

    def eof(self, settled: bool) -> None:
        for out in list(self.outs.values()):
            g = out.group
            self._release(out)
            if g is not None and out.group is None:
                out.group = g  # the response may go on in lines not written yet
        super().eof(settled)

    # -- results written inside a streamed response --------------------------------------

    def _continues(self, out: Out, v: dict[str, Any]) -> bool:
        """Whether the line belongs inside the response being assembled: one of its lines
        (same ``message.id``, and when results of its calls were written since, provably the
        same response: :func:`same_response`), or a user line holding only results of its
        tool calls."""
        g = out.group
        if g is None:
            return False
        message = v["message"]
        if v.get("type") == "assistant":
            if message.get("id") != g.msg_id:
                return False
            return not self._held.get(out.target.name) or same_response(g, v)
        content = message.get("content")
        if not isinstance(content, list) or not content or v.get("isCompactSummary") is True:
            return False
        calls = set(call_ids(g.parts))
        return all(
            isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") in calls
            for b in content
        )

    def _release(self, out: Out) -> None:
        """Emit the response being assembled, then the result lines held back for it (each
        mapped as its own line: its provenance, raw text and time)."""
        held = self._held.pop(out.target.name, None)
        if not held:
            return
        current = self.line, self.time, self._claimed
        try:
            # the response is complete at its first result, as if nothing had been held back:
            # the same events whether the source ends here or goes on
            self.line, self.time, self._claimed = held[0][0], held[0][1], True
            self.flush_group(out)
            for line, time, v, uuid in held:
                self.line, self.time, self._claimed = line, time, False
                self._user(out, v, uuid)
                if not self._claimed:  # lossless whatever happened: the line kept raw
                    self.raw_line("user", known=False)
        finally:
            self.line, self.time, self._claimed = current

    def _header(self, v: dict[str, Any]) -> None:
        target = self.main.target
        info = target.meta.setdefault("import", {})
        if self.session is None and isinstance(v.get("sessionId"), str):
            self.session = v["sessionId"]
            info["session"] = self.session
        if "version" not in info and isinstance(v.get("version"), str):
            info["version"] = v["version"]
            target.agent = f"claude-code/{v['version']}"
        if target.cwd is None and isinstance(v.get("cwd"), str):
            target.cwd = v["cwd"]
        if "git_branch" not in info and isinstance(v.get("gitBranch"), str) and v["gitBranch"]:
            info["git_branch"] = v["gitBranch"]
        if target.created is None and self.time:
            target.created = self.time
        if self.flat and "sidechain_of" not in info and self.session:
            info["sidechain_of"] = self.session
            if isinstance(v.get("agentId"), str):
                info["agent_id"] = v["agentId"]

    def _out_of(self, v: dict[str, Any], uuid: str | None, parent: str | None) -> Out:
        if self.flat or v.get("isSidechain") is not True:
            if uuid:
                self.root_of[uuid] = ""
            return self.main
        root = self.root_of.get(parent) if parent else None
        if not root:
            root = uuid or f"line-{self.n}"
        if uuid:
            self.root_of[uuid] = root
        name = f"sidechain-{root}"
        out = self.outs.get(name)
        if out is None:
            out = self._sidechain(root, v)
        return out

    def _sidechain(self, root: str, v: dict[str, Any]) -> Out:
        meta: dict[str, Any] = {}
        if self.session:
            meta["session"] = self.session
        message = v.get("message")
        prompt = message.get("content") if isinstance(message, dict) else None
        text = prompt if isinstance(prompt, str) else text_of(anthropic_user_parts(prompt))
        call = self.task_prompts.get(text)
        if call is not None:
            meta["spawned_by"] = call
        return self.side_out(root, meta, text)

    def _user(self, out: Out, v: dict[str, Any], uuid: str | None) -> None:
        message = v["message"]
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        others = [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "tool_result")]
        msg_id = uuid or f"line-{self.n}"
        vid: int | None = None
        for k, b in enumerate(results):
            call = b.get("tool_use_id")
            if not isinstance(call, str):
                continue
            vid = self.tool_result(
                out, call, anthropic_result(b.get("content")), is_error=b.get("is_error") is True,
                msg_id=msg_id if k == 0 else f"{msg_id}#{k}", tag=f"result:{k}" if k else None,
            )  # fmt: skip
            self._results[(out.target.name, call)] = vid
        parts = anthropic_user_parts(content if isinstance(content, str) else others)
        if parts:
            text = text_of(parts)
            if v.get("isCompactSummary") is True and out.compaction is not None:
                done = self.finish_compaction(out, text, msg_id, tag="user:" if results else "")
                if done is not None:
                    self._remember(out, uuid, done)
                    return
            interrupted = text.startswith("[Request interrupted by user")
            prompt = (
                not results
                and not interrupted
                and v.get("isMeta") is not True
                and v.get("isCompactSummary") is not True
            )
            if prompt:
                self.start_turn(out)
                self.note_title(out, command_title(text))
            vid = self.message(
                out, "user/message", "user", parts, msg_id, tag="user" if results else None
            )
            if interrupted:
                self.end_turn(out, "aborted", tag="aborted")
        self._remember(out, uuid, vid)

    def _clear_result(self, out: Out, call: str) -> None:
        """Replace the call's result on the surface by the placeholder Claude Code sends
        once a microcompaction cleared it."""
        vid = self._results.get((out.target.name, call))
        if vid is None or not out.surface.is_current(vid):
            return
        old = out.data[vid]["message"]
        new = self.tool_result(
            out, call, CLEARED_TEXT, is_error=old["parts"][0].get("is_error") is True,
            msg_id=old["id"], tag=f"cleared:{call}", extra={"cleared": "microcompact"},
            replaces=vid,
        )  # fmt: skip
        self._results[(out.target.name, call)] = new
        for uuid, node in out.entry_vid.items():  # a rewind to that line anchors on the new one
            if node == vid:
                out.entry_vid[uuid] = new

    def _remember(self, out: Out, uuid: str | None, vid: int | None) -> None:
        if uuid and vid is not None:
            out.entry_vid[uuid] = vid

    def _assistant(self, out: Out, v: dict[str, Any], uuid: str | None) -> None:
        message = v["message"]
        msg_id = message.get("id") if isinstance(message.get("id"), str) else None
        g = self.group_for(out, msg_id or uuid or f"line-{self.n}")
        self.add_line(g, uuid)
        if uuid:
            out.entry_group[uuid] = g
        parts = anthropic_assistant_parts(message.get("content"), signed_by=ANTHROPIC)
        g.parts.extend(parts)
        model = message.get("model")
        if isinstance(model, str) and model and model != "<synthetic>":
            g.model = model
        if isinstance(message.get("usage"), dict):
            g.usage = message["usage"]  # each split line repeats it; the last is complete
        if isinstance(v.get("requestId"), str):
            g.extra["request_id"] = v["requestId"]
        if out is self.main:
            for p in parts:
                args = p.get("arguments")
                if (
                    p.get("type") == "tool_call"
                    and p["name"] in ("Task", "Agent")
                    and isinstance(args, dict)
                    and isinstance(args.get("prompt"), str)
                ):
                    self.task_prompts.setdefault(args["prompt"], p["id"])

    def after_tool_call(
        self, out: Out, part: dict[str, Any], imp: dict[str, Any], first: int
    ) -> None:
        if part["name"] != "TodoWrite" or not isinstance(part.get("arguments"), dict):
            return
        todos = part["arguments"].get("todos")
        if not isinstance(todos, list):
            return
        items = []
        for t in todos:
            if not isinstance(t, dict) or not isinstance(t.get("content"), str):
                return
            if t.get("status") not in _STATUSES:
                return
            item = {"content": t["content"], "status": t["status"]}
            if isinstance(t.get("id"), str):
                item["id"] = t["id"]
            items.append(item)
        data = {"todos": items, "import": imp}
        self.emit(out, "todo/write", data, self.key(f"todo:{part['id']}", n=first))


#: Claude Code keeps a tree of projects under its config directory on every platform.
AGENTS = (
    Agent(
        "claude-code",
        "Claude Code",
        ClaudeCodeMapper,
        (Home(("linux", "darwin", "win32"), "${CLAUDE_CONFIG_DIR:-~/.claude}/projects"),),
        "*.jsonl",
        jsonl,
    ),
)
