"""Factory Droid sessions (``~/.factory/sessions/<cwd slug>/<session>.jsonl``) to jsonltape.

Droid is closed source and publishes no format: this follows what independent readers of its
files agree on (see the spec, Appendix B): a first line ``{"type": "session_start", id, title,
owner, version, cwd, ...}``, then ``{"type": "message", id, timestamp, parentId?, message:
{role, content, model?, usage?}}`` lines whose ``content`` is Anthropic Messages content (a
string, or ``text``, ``thinking``, ``tool_use``, ``tool_result``, ``image`` blocks). Session
totals live beside it in ``<session>.settings.json`` (``tokenUsage``), not per response.

Mapping (each source line is kept verbatim on the event it produced, else as ``import/raw``):

* ``session_start``: the header (``cwd``; ``id``, ``owner``, ``version`` in ``meta.import``;
  a ``callingSessionId`` / ``callingToolUseId``, which a sub-agent's session names its caller
  by, as ``sidechain_of`` / ``spawned_by``); its ``title`` is the session's title.
* A user ``message``: ``tool_result`` blocks → ``tool/result`` (text blocks joined by
  newlines, ``is_error`` kept), other content → a ``user/message``; a message with no result
  is a prompt starting a turn.
* An assistant ``message``: one ``assistant/message`` (``text``; ``thinking`` → reasoning,
  never signed: which provider answered is not recorded per message; ``tool_use`` →
  tool_call; other blocks kept as parts of their own type), ``model``, and ``usage`` when the
  line has one (Droid's ``inputTokens``, ``outputTokens``, ``cacheCreationTokens``,
  ``cacheReadTokens``, ``thinkingTokens`` or Anthropic's names → Anthropic's names); its id
  is the line's ``id``.
* Anything else (``todo_state``, ...) stays raw. Droid never marks a turn's end: the next
  prompt (or a finished source) ends it.
"""

from __future__ import annotations

from typing import Any

from ._agent import Agent, Home, jsonl
from ._base import Mapper, Out
from ._parts import (
    anthropic_assistant_parts,
    anthropic_result,
    anthropic_split,
    renamed_usage,
)
from ._source import parse_time

__all__ = ["AGENTS", "DroidMapper"]

_TOKENS = (
    ("inputTokens", "input_tokens"),
    ("input_tokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("output_tokens", "output_tokens"),
    ("cacheCreationTokens", "cache_creation_input_tokens"),
    ("cacheCreationInputTokens", "cache_creation_input_tokens"),
    ("cache_creation_input_tokens", "cache_creation_input_tokens"),
    ("cacheReadTokens", "cache_read_input_tokens"),
    ("cacheReadInputTokens", "cache_read_input_tokens"),
    ("cache_read_input_tokens", "cache_read_input_tokens"),
    ("thinkingTokens", "reasoning_tokens"),
)
#: ``session_start`` members kept in ``meta.import`` (source name -> ours).
_META = (("id", "session"), ("owner", "owner"), ("version", "version"))
_CALLER = (("callingSessionId", "sidechain_of"), ("callingToolUseId", "spawned_by"))


class DroidMapper(Mapper):
    source = "factory-droid"
    known_raw = frozenset({"todo_state"})
    implicit_end = True

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = "factory-droid"
        self._started = False

    def sniff(self, value: dict[str, Any]) -> str | None:
        if value.get("type") in ("session_start", "message"):
            return None
        if "payload" in value:
            return "this looks like a Codex rollout (use --from codex)"
        if "uuid" in value:
            return "this looks like a Claude Code transcript (use --from claude-code)"
        return "not a Factory Droid session line (no session_start or message type)"

    def handle(self, v: dict[str, Any]) -> None:
        self.time = parse_time(v.get("timestamp")) or self.time
        t = v.get("type")
        out = self.main
        if t == "session_start":
            self._session_start(out, v)
            self.raw_line("session_start", known=True)
            return
        message = v.get("message")
        if t != "message" or not isinstance(message, dict):
            return
        if out.target.created is None and self.time:
            out.target.created = self.time
        mid = v["id"] if isinstance(v.get("id"), str) and v["id"] else f"line-{self.n}"
        if message.get("role") == "user":
            self._user(out, message.get("content"), mid)
        elif message.get("role") == "assistant":
            self._assistant(out, message, mid)

    def _session_start(self, out: Out, v: dict[str, Any]) -> None:
        if self._started:
            return  # a resumed session's copy: raw only
        self._started = True
        target = out.target
        info = target.meta.setdefault("import", {})
        for src, dst in (*_META, *_CALLER):
            if isinstance(v.get(src), (str, int)) and not isinstance(v[src], bool):
                info[dst] = v[src]
        if isinstance(v.get("cwd"), str) and v["cwd"]:
            target.cwd = v["cwd"]
        if isinstance(v.get("title"), str) and v["title"].strip():
            self.source_title(v["title"])
        target.created = parse_time(v.get("timestamp")) or None

    def _user(self, out: Out, content: Any, mid: str) -> None:
        results, parts = anthropic_split(content)
        for k, b in enumerate(results):
            call = b.get("tool_use_id")
            if not isinstance(call, str) or not call:
                raise ValueError("a tool_result without a tool_use_id")
            self.tool_result(
                out, call, anthropic_result(b.get("content")), is_error=b.get("is_error") is True,
                msg_id=mid if k == 0 else f"{mid}#{k}", tag=f"result:{k}" if k else None,
            )  # fmt: skip
        if parts:
            tag = "user" if results else None
            self.user_message(out, parts, mid, prompt=not results, tag=tag)

    def _assistant(self, out: Out, message: dict[str, Any], mid: str) -> None:
        if out.turn is None:
            self.start_turn(out)
        g = self.group_for(out, mid)
        self.add_line(g, mid)
        g.parts.extend(anthropic_assistant_parts(message.get("content"), signed_by=None))
        if isinstance(message.get("model"), str) and message["model"]:
            g.model = message["model"]
        usage = renamed_usage(message.get("usage"), _TOKENS, ints_only=True)
        if usage:
            g.usage = usage
        self.flush_group(out)


AGENTS = (
    Agent(
        "factory-droid",
        "Factory Droid",
        DroidMapper,
        (Home(("linux", "darwin", "win32"), "${FACTORY_HOME:-~/.factory}/sessions"),),
        "*.jsonl",
        jsonl,
    ),
)
