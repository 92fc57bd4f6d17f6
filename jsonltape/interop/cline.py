"""Cline, Roo Code and Kilo Code tasks (``tasks/<id>/`` folders; Cline 4's SDK sessions) to
jsonltape.

:mod:`._cline_store` renders each task or session as JSONL records; this maps them. The API
history is Anthropic's message shape plus each agent's extras (see the store's sources): a
``role`` and ``content`` (a string or blocks: ``text``, ``image``, ``tool_use``,
``tool_result``, ``thinking``, ``redacted_thinking``, Roo's ``reasoning``, Cline 4's ``file``).

Mapping (each record is kept verbatim on the event it produced, else as ``import/raw``):

* a ``user`` message: its ``tool_result`` blocks → a ``tool/result`` each (text blocks joined,
  ``is_error`` kept), its other blocks → a ``user/message`` (``image`` → a blob), which starts a
  turn when the message holds no result (a prompt, Cline's ``<task>``, ``<feedback>`` or
  ``[TASK RESUMPTION]`` texts: all of it is what the model was sent);
* an ``assistant`` message → an ``assistant/message``: ``thinking`` → reasoning (signed only
  when the provider Cline records is ``anthropic``), Roo's ``reasoning`` → reasoning, ``text``,
  ``tool_use`` → a ``tool_call`` (encrypted reasoning, ``redacted_thinking`` and other blocks are
  kept as parts of their own type); ``message.id`` is the provider's response id Cline and Roo
  keep in ``id`` (Cline 4: the message's own ``id``); ``model`` from ``modelInfo`` (Kilo Code:
  the ``<model>`` its ``# Current Mode`` environment details name); ``usage`` from the request's
  ``api_req_started`` (``tokensIn``, ``tokensOut``, ``cacheReads``, ``cacheWrites``, ``cost`` →
  ``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``, ``cost``), else the message's ``metrics`` (Cline: its
  ``cached`` adds reads and writes, taken as reads; Cline 4: ``inputTokens``, ``outputTokens``,
  ``cacheReadTokens``, ``cacheWriteTokens``, ``cost``), with ``import.input_includes_cache``
  when the input count is the whole prompt (a request by the OpenAI protocol, every
  ``metrics``: the usage rules take the cache out of it, spec B.12);
* a message Roo Code marks ``isSummary`` (it sends the history from its latest summary on), or a
  Cline 4 message whose ``metadata.kind`` is ``compaction`` or ``compaction_summary`` → a
  compaction of everything before it, the message's text the summary.

None of them marks the end of a turn: the next prompt (or a finished source) ends it. The title
is the task as the extension shows it (``task`` of Roo's ``history_item.json`` or Cline's
``state/taskHistory.json``; Cline 4: the manifest's ``metadata.title``), else the first prompt's
``<task>`` text. A Roo Code sub-task keeps its ``parentTaskId`` as ``parent``, a Cline 4
sub-agent its root session.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from .._limits import ascii_int
from ._agent import Agent, Home
from ._base import Mapper, Out
from ._cline_store import API, UI, units, wanted
from ._parts import (
    ANTHROPIC,
    blob_part,
    member,
    parts_of,
    reasoning_part,
    text_of,
    text_part,
    tool_call_part,
)
from ._source import parse_time

__all__ = ["AGENTS", "ClineMapper", "KiloCodeMapper", "RooCodeMapper"]

_decode = msgspec.json.decode
_TASK = re.compile(r"<task>\s*(.*?)\s*</task>", re.S)
#: Kilo Code's environment details name the model in its ``# Current Mode`` block.
_MODE_MODEL = re.compile(r"# Current Mode\b[^#]*?<model>([^<\n]+)</model>")
_UI_TOKENS = (
    ("tokensIn", "input_tokens"),
    ("tokensOut", "output_tokens"),
    ("cacheReads", "cache_read_input_tokens"),
    ("cacheWrites", "cache_creation_input_tokens"),
)
_SDK_TOKENS = (
    ("inputTokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("cacheReadTokens", "cache_read_input_tokens"),
    ("cacheWriteTokens", "cache_creation_input_tokens"),
)
#: What Cline 4 marks as a compaction's summary (``metadata.kind``).
_SUMMARY_KINDS = frozenset({"compaction", "compaction_summary"})


def _usage(values: Any, names: tuple[tuple[str, str], ...]) -> dict[str, Any] | None:
    if not isinstance(values, dict):
        return None
    usage: dict[str, Any] = {dst: values[src] for src, dst in names if type(values.get(src)) is int}
    cost = values.get("cost")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        usage["cost"] = cost
    return usage or None


def _metrics(m: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    """The usage a message's own ``metrics`` give (Cline 3.3x on; Cline 4), and whether its
    input count includes the cache reads and writes: both do (Cline 3's ``prompt`` adds them
    up; a real Cline 4 session's ``inputTokens`` grows with the whole prompt while
    ``cacheReadTokens`` is most of it)."""
    metrics = m.get("metrics")
    if not isinstance(metrics, dict):
        return None, False
    tokens = metrics.get("tokens")
    if isinstance(tokens, dict):  # Cline 3: {tokens: {prompt, completion, cached}, cost}
        names = (("prompt", "input_tokens"), ("completion", "output_tokens"),
                 ("cached", "cache_read_input_tokens"))  # fmt: skip
        return _usage({**tokens, "cost": metrics.get("cost")}, names), True
    return _usage(metrics, _SDK_TOKENS), True


class ClineMapper(Mapper):
    source = "cline"
    implicit_end = True
    known_raw = frozenset({"task", "session", "ui"})

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = self.source
        #: the usage of the request running (its ``api_req_started``), for its reply
        self.usage: dict[str, Any] | None = None
        #: its ``apiProtocol`` is ``openai``: ``tokensIn`` includes the cache reads and writes
        self.inclusive = False
        #: the model the latest environment details name (Kilo Code)
        self.model: str | None = None

    def sniff(self, value: dict[str, Any]) -> str | None:
        if value.get("type") in ("task", "session") and isinstance(value.get("id"), str):
            return None
        return f"not a {self.source} task rendering: its first record is not the task's"

    def handle(self, v: dict[str, Any]) -> None:
        kind = v.get("type")
        if kind in ("task", "session"):
            self._header(v)
        elif kind == "ui":
            self._request(v.get("message"))
        elif kind in ("api", "message"):
            m = v.get("message")
            if not isinstance(m, dict):
                raise ValueError("a message that is not an object")
            self.time = parse_time(m.get("ts")) or self.time
            self._message(m)
        else:
            self.raw_line(str(kind), known=False)

    def _header(self, v: dict[str, Any]) -> None:
        target = self.main.target
        if target.meta.get("import"):
            return
        info: dict[str, Any] = {"session": v["id"]}
        for src, dst in (("parentTaskId", "parent"), ("rootTaskId", "root"), ("parent", "parent"),
                         ("forked_from", "forked_from"), ("agent", "role"),
                         ("provider", "provider")):  # fmt: skip
            if isinstance(v.get(src), str) and v[src]:
                info[dst] = v[src]
        target.meta["import"] = info
        if isinstance(v.get("cwd"), str) and v["cwd"]:
            target.cwd = v["cwd"]
        started = parse_time(v.get("started_at")) or _id_time(v["id"])
        if started:
            self.time = started
            target.created = started
        if isinstance(v.get("model"), str):
            self.set_request(self.main, model=v["model"], raw=False)

    def _request(self, ui: Any) -> None:
        """An ``api_req_started``: the usage of its request, for the reply that follows."""
        if not isinstance(ui, dict) or not isinstance(ui.get("text"), str):
            return
        self.time = parse_time(ui.get("ts")) or self.time
        try:
            info = _decode(ui["text"])
        except msgspec.DecodeError:
            return
        self.usage = _usage(info, _UI_TOKENS)
        self.inclusive = isinstance(info, dict) and info.get("apiProtocol") == "openai"

    def _message(self, m: dict[str, Any]) -> None:
        out = self.main
        content = m.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        meta = m.get("metadata")
        if m.get("isSummary") is True or (
            isinstance(meta, dict) and meta.get("kind") in _SUMMARY_KINDS
        ):
            self._condensed(out, m, blocks)
        elif m.get("role") == "assistant":
            self._assistant(out, m, blocks)
        elif m.get("role") == "user":
            self._user(out, m, blocks)
        else:
            self.raw_line(f"message/{m.get('role')}", known=False)

    def _user(self, out: Out, m: dict[str, Any], blocks: list[Any]) -> None:
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        for i, b in enumerate(results):
            call = b.get("tool_use_id")
            if not isinstance(call, str):
                continue
            response = b.get("content")
            if isinstance(response, list):
                text = text_of(parts_of(response, _block))
                response = text if text or not response else response
            self.tool_result(
                out, call, response if response is not None else "",
                is_error=b.get("is_error") is True, msg_id=f"{_mid(m, self.n)}.{i}",
                tag=f"result:{i}" if i else None,
            )  # fmt: skip
        parts = parts_of([b for b in blocks if b not in results], _block, empty_text=False)
        parts = [p for p in parts if p.get("type") != "text" or p["content"]]
        if not parts:
            if not results:
                self.raw_line("message/user", known=True)
            return
        text = text_of(parts)
        found = _MODE_MODEL.search(text)
        if found is not None:
            self.model = found.group(1).strip()
        if not results:
            self.start_turn(out)
            task = _TASK.search(text)
            self.note_title(out, task.group(1) if task else text)
        self.message(out, "user/message", "user", parts, _mid(m, self.n),
                     tag="text" if results else None)  # fmt: skip

    def _assistant(self, out: Out, m: dict[str, Any], blocks: list[Any]) -> None:
        info = member(m, "modelInfo")
        provider = info.get("providerId") or info.get("provider")
        signer = ANTHROPIC if provider == "anthropic" else None
        parts = parts_of(blocks, lambda b: _block(b, signer), empty_text=False)
        parts = [p for p in parts if p.get("type") != "text" or p["content"]]
        usage, inclusive = (self.usage, self.inclusive) if self.usage else _metrics(m)
        self.usage = None
        if not parts:
            self.raw_line("message/assistant", known=True)
            return
        if out.turn is None:
            self.start_turn(out)
        if isinstance(provider, str) and provider:
            self.set_request(out, provider=provider)
        mid = _mid(m, self.n)
        g = self.group_for(out, mid)
        self.add_line(g, m["id"] if isinstance(m.get("id"), str) else None)
        g.parts = parts
        model = info.get("modelId") or info.get("id") or self.model
        g.model = model if isinstance(model, str) and model else None
        g.usage = usage
        if usage is not None and inclusive:
            g.extra["input_includes_cache"] = True  # read so by the usage rules (B.12)
        self.flush_group(out)

    def _condensed(self, out: Out, m: dict[str, Any], blocks: list[Any]) -> None:
        self.end_turn(out, "completed")
        text = text_of(parts_of(blocks, _block, empty_text=False))
        if self.start_compaction(out, "condense", None):
            self.finish_compaction(out, text, _mid(m, self.n))
        else:
            self._user(out, m, blocks)


class RooCodeMapper(ClineMapper):
    source = "roo-code"


class KiloCodeMapper(ClineMapper):
    source = "kilo-code"


def _block(b: dict[str, Any], signer: str | None = None) -> dict[str, Any] | None:
    kind = b.get("type")
    if kind == "text" and isinstance(b.get("text"), str):
        return text_part(b["text"])
    if kind == "image":
        source: dict[str, Any] = b["source"] if isinstance(b.get("source"), dict) else b
        data = source.get("data")
        mime = source.get("media_type") or source.get("mediaType")
        if isinstance(data, str) and isinstance(mime, str):
            return blob_part(data, mime, "image")
        return None
    if kind == "thinking" and isinstance(b.get("thinking"), str):
        return reasoning_part(b["thinking"], b.get("signature"), signed_by=signer)
    if kind == "reasoning" and isinstance(b.get("text"), str) and not b.get("encrypted_content"):
        return reasoning_part(b["text"])
    if kind == "tool_use" and isinstance(b.get("id"), str):
        return tool_call_part(b["id"], str(b.get("name")), b.get("input"))
    if kind == "file" and isinstance(b.get("content"), str):  # Cline 4: a mentioned file
        return text_part(f'<file_content path="{b.get("path")}">\n{b["content"]}\n</file_content>')
    return None  # kept as a part of its own type (parts_of)


def _mid(m: dict[str, Any], n: int) -> str:
    return m["id"] if isinstance(m.get("id"), str) and m["id"] else f"line-{n}"


def _id_time(task_id: str) -> int | None:
    """A Cline task id is its creation time in ms; Cline 4's session ids start with it."""
    head = task_id.split("_", 1)[0]
    return ascii_int(head) if 12 <= len(head) <= 14 else None


# -- where each extension keeps its tasks -----------------------------------------------------

#: VS Code and the forks the extensions run in: their user directory on each platform.
_EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")


def _global_storage(extension: str) -> tuple[Home, ...]:
    homes: list[Home] = []
    for editor in _EDITORS:
        homes += [
            Home(
                ("linux",),
                f"${{XDG_CONFIG_HOME:-~/.config}}/{editor}/User/globalStorage/{extension}",
            ),
            Home(
                ("darwin",),
                f"~/Library/Application Support/{editor}/User/globalStorage/{extension}",
            ),
            Home(("win32",), f"%APPDATA%/{editor}/User/globalStorage/{extension}"),
        ]
    return tuple(homes)


_PATTERN = "tasks/*/api_conversation_history.json"
#: A task folder's documents: a change of any is a change of its session (the read-only index).
_DOCUMENTS = (API, UI, "history_item.json")
AGENTS = (
    Agent(
        "cline",
        "Cline",
        ClineMapper,
        (
            Home(("linux", "darwin", "win32"), "${CLINE_DIR:-~/.cline}/data"),
            *_global_storage("saoudrizwan.claude-dev"),
        ),
        f"{_PATTERN}, sessions/*/*.messages.json",
        wanted,
        units=units,
        keyed=True,
        prune=("checkpoints",),
        documents=_DOCUMENTS,
    ),
    Agent(
        "roo-code",
        "Roo Code",
        RooCodeMapper,
        _global_storage("rooveterinaryinc.roo-cline"),
        _PATTERN,
        wanted,
        units=units,
        keyed=True,
        prune=("checkpoints",),
        documents=_DOCUMENTS,
    ),
    Agent(
        "kilo-code",
        "Kilo Code",
        KiloCodeMapper,
        _global_storage("kilocode.kilo-code"),
        _PATTERN,
        wanted,
        units=units,
        keyed=True,
        prune=("checkpoints",),
        documents=_DOCUMENTS,
    ),
)
