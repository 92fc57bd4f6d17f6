"""pi coding agent sessions (``~/.pi/agent/sessions/--<cwd>--/<ts>_<id>.jsonl``) to jsonltape.

Both the legacy linear format (v1: no ``version``, entries without ids) and the tree formats
(v2/v3: ``id``/``parentId``) are read as they are, without pi's own migration.

Mapping (each source line is kept verbatim on the event it produced, else as ``import/raw``):

* the ``session`` header: metadata (id, cwd, ``parentSession``/``branchedFrom``) and a
  ``request/header`` with provider, model and thinking level; ``model_change`` and
  ``thinking_level_change`` update it.
* ``message`` entries by role: ``user`` → a prompt (starts a turn, unless one is running: then
  it is a message the user queued into it, answered in a turn of its own); ``assistant`` → an
  ``assistant/message`` (text, ``thinking`` as reasoning, signed only when Anthropic issued
  the ``thinkingSignature`` (:func:`signer`), ``toolCall`` as tool_call) with model and usage,
  a ``tool/call`` per call, and the turn ends on its
  ``stopReason`` (stop → completed, length → max-tokens, aborted, error); ``toolResult`` →
  ``tool/result``; ``bashExecution`` (a user's ``!command``, as ``bashExecutionToText`` words
  it) and ``custom``/``hookMessage`` → user messages (what pi puts in the model's context);
  ``system`` (pi 0.86 on: the system prompt ``content`` and ``sections``, ``toolsAdded``,
  ``toolsRemoved``) → a ``request/header`` with the prompt and tools pi replays from them.
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

from ._agent import Agent, Home, jsonl
from ._base import Mapper, Out, title_of
from ._parts import (
    ANTHROPIC,
    blob_part,
    parts_of,
    reasoning_part,
    renamed_usage,
    text_of,
    text_part,
    tool_call_part,
)
from ._source import SourceLine, parse_time

__all__ = ["AGENTS", "PiMapper"]

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


def pi_parts(content: Any, *, signed_by: str | None = None) -> list[dict[str, Any]]:
    """pi content blocks as parts; ``signed_by``: who issued the thinking signatures in them
    (:func:`signer`)."""
    return parts_of(content, lambda b: _pi_block(b, signed_by))


def signer(m: dict[str, Any]) -> str | None:
    """Who issued the ``thinkingSignature`` of an assistant message's thinking: Anthropic when
    pi's ``anthropic`` provider (its Anthropic Messages API) answered. pi keeps other replay data
    in the same field (packages/ai/src/providers at badlogic/pi-mono 83378aad:
    ``openai-completions.ts`` the name of the delta field the reasoning came in, such as
    ``reasoning_content``; ``openai-responses-shared.ts`` the reasoning item as JSON;
    ``google*.ts`` Gemini's thought signature), none of which Anthropic accepts."""
    provider, api = m.get("provider"), m.get("api")
    if provider == ANTHROPIC or (provider is None and api == "anthropic-messages"):
        return ANTHROPIC
    return None


def _pi_block(b: dict[str, Any], signed_by: str | None) -> dict[str, Any] | None:
    kind = b.get("type")
    if kind == "text" and isinstance(b.get("text"), str):
        return text_part(b["text"])
    if kind == "thinking" and isinstance(b.get("thinking"), str):
        # redacted thinking keeps Anthropic's encrypted data in the signature's place: it is
        # no signature of this (placeholder) text
        by = None if b.get("redacted") is True else signed_by
        return reasoning_part(b["thinking"], b.get("thinkingSignature"), signed_by=by)
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
        #: the prompt and tools after each system message entry, and the ones in use
        self._prompts: dict[str, SystemPrompt] = {}
        self._prompt = SystemPrompt()

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
            moved = out.leaf is not None and parent != out.leaf
            self.branch_to(out, parent, entry, message=t != "compaction")
            if moved and self._prompts:  # the prompt and tools of the branch continued
                self._use_prompt(out, self._prompt_at(out, parent), raw=False)
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
        if role == "system":
            self._system(out, m, entry)
            return None
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

    # -- the system prompt and tools (pi 0.86 on: ``system`` messages in the transcript) -------

    def _system(self, out: Out, m: dict[str, Any], entry: str | None) -> None:
        """A ``SystemMessage`` ``{content, sections?, toolsAdded?, toolsRemoved?}``: applied to
        the prompt and tools of the branch it continues, the result is the ``request/header``
        (system and tools) every request from here on carries, as pi replays them."""
        parent = out.parent_of.get(entry) if entry is not None else None
        base = self._prompt_at(out, parent) if entry is not None else self._prompt
        prompt = base.updated(m)
        if entry is not None:
            self._prompts[entry] = prompt
        self._use_prompt(out, prompt, raw=True)
        if not self._claimed:  # the same prompt and tools again: kept raw, understood
            self.raw_line("message/system", known=True)

    def _prompt_at(self, out: Out, entry: str | None) -> SystemPrompt:
        """The prompt and tools on the branch ending at ``entry``: those of its nearest system
        message (or none)."""
        seen = 0
        while entry is not None and seen < 100_000:
            found = self._prompts.get(entry)
            if found is not None:
                return found
            entry = out.parent_of.get(entry)
            seen += 1
        return SystemPrompt()

    def _use_prompt(self, out: Out, prompt: SystemPrompt, *, raw: bool) -> None:
        if prompt == self._prompt:
            return
        self._prompt = prompt
        text, tools = prompt.text(), list(prompt.tools.values())
        had = out.request
        self.set_request(
            out,
            raw=raw,
            system=text if text or "system" in had else None,
            tools=tools if tools or "tools" in had else None,
        )

    def _assistant(self, out: Out, m: dict[str, Any], msg_id: str) -> int | None:
        if out.turn is None:  # the agent answers a message queued into the previous turn
            self.start_turn(out)
        g = self.group_for(out, msg_id)
        self.add_line(g)
        g.parts = pi_parts(m.get("content"), signed_by=signer(m))
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


class SystemPrompt:
    """The system prompt and tools pi sends after replaying its system messages in order
    (``getCurrentSystemMessage``, ``getSystemMessageText`` and ``getCurrentTools`` in
    packages/ai/src/utils, earendil-works/pi 342b110f): the content of each message appended
    (joined by blank lines), then the named sections (a later value replaces one in its place,
    ``null`` removes it), all non-empty pieces joined by blank lines; tools by name, removals
    before additions within a message, in first-declaration order."""

    def __init__(
        self,
        contents: tuple[str, ...] = (),
        sections: dict[str, str] | None = None,
        tools: dict[str, Any] | None = None,
    ) -> None:
        self.contents = contents
        self.sections = sections or {}
        self.tools = tools or {}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SystemPrompt):
            return NotImplemented
        key = (self.contents, list(self.sections.items()), list(self.tools.items()))
        return key == (other.contents, list(other.sections.items()), list(other.tools.items()))

    def updated(self, m: dict[str, Any]) -> SystemPrompt:
        """This state with the system message ``m`` applied."""
        contents = self.contents
        text = _content_text(m.get("content"))
        if text:
            contents = (*contents, text)
        sections = dict(self.sections)
        patch = m.get("sections")
        for name, value in patch.items() if isinstance(patch, dict) else ():
            if value is None:
                sections.pop(name, None)
            elif isinstance(value, str):
                sections[name] = value
        tools = dict(self.tools)
        for tool in _list(m.get("toolsRemoved")):
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                tools.pop(tool["name"], None)
        for tool in _list(m.get("toolsAdded")):
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                tools[tool["name"]] = tool
        return SystemPrompt(contents, sections, tools)

    def text(self) -> str:
        pieces = ["\n\n".join(self.contents), *self.sections.values()]
        return "\n\n".join(p for p in pieces if p)


def _content_text(content: Any) -> str:
    """pi's ``contentText``: a string as it is, else the text blocks joined by newlines."""
    if isinstance(content, str):
        return content
    return "\n".join(
        b["text"]
        for b in _list(content)
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


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


AGENTS = (
    Agent(
        "pi",
        "pi",
        PiMapper,
        (Home(("linux", "darwin", "win32"), "${PI_CODING_AGENT_DIR:-~/.pi/agent}/sessions"),),
        "*.jsonl",
        jsonl,
    ),
)
