"""What one response cost in tokens, and which response it is: the per-source rules.

Every ``assistant/message`` that carries ``data.usage`` is one model response. Its tokens are
read into six disjoint counts, as providers bill them (:class:`Tokens`), by the rule of the
usage's *dialect*: the names the source wrote and what they mean (Codex's ``input_tokens``
include its cached ones, Claude Code's do not). Its *key* is the response's own id as the source
defines it, so that a response logged more than once (a resumed Claude Code session copies the
earlier messages, a sidechain replays its parent's, a fork's messages are merged back into the
parent) is counted once. Spec Appendix B.12 states these rules; the index stores one
:class:`Response` per such event and counts one row per key (the ingest, ``jsonltape_daemon``).

Everything here is pure: a function of one event's data and its session's header.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from .._limits import ascii_int

__all__ = [
    "SLOT_MS",
    "THRESHOLDS",
    "Links",
    "Response",
    "Tokens",
    "read_tokens",
    "response_of",
    "session_links",
    "tier_of",
]

#: Reports read sums per 15 minutes of each session: every time zone's offset from UTC is a
#: multiple of 15 minutes, so a local day is a whole number of slots.
SLOT_MS = 900_000

#: The prompt sizes at which price tables switch to long-context rates (LiteLLM's
#: ``*_above_<N>k_tokens`` members, every N it uses). A response is stored with how many of
#: them its prompt passed (:func:`tier_of`), so any table over these thresholds prices it
#: exactly; a table with another threshold is refused when it is loaded.
THRESHOLDS = (32_000, 100_000, 128_000, 200_000, 256_000, 272_000, 512_000)


class Tokens(NamedTuple):
    """Disjoint token counts of one response (or a sum of them)."""

    input: int = 0  #: input billed at the input rate (cache reads and writes not included)
    output: int = 0  #: output billed at the output rate (reasoning not included)
    cache_5m: int = 0  #: cache writes (5-minute, or of unknown duration)
    cache_1h: int = 0  #: cache writes of one hour
    cache_read: int = 0
    reasoning: int = 0  #: reasoning ("thinking") tokens a source counts apart from output

    @property
    def total(self) -> int:
        return sum(self)

    @property
    def prompt(self) -> int:
        """The request's prompt: what long-context rates are chosen by."""
        return self.input + self.cache_5m + self.cache_1h + self.cache_read

    def plus(self, other: Tokens) -> Tokens:
        return Tokens(*(a + b for a, b in zip(self, other, strict=True)))


class Response(NamedTuple):
    """The usage row of one response event."""

    rkey: str  #: the response's own id (see :func:`response_of`)
    time: int  #: the event's time, ms
    model: str  #: ``data.model``, "" when the event names none
    tokens: Tokens
    tier: int  #: how many of :data:`THRESHOLDS` the prompt passed
    fast: bool  #: Claude Code's fast mode (``usage.speed == "fast"``): the table's multiplier


class Links(NamedTuple):
    """How a session hangs in a tree of sub-agents: names it is known by, and its parent's."""

    name: str  #: ``id:<session id>``
    alias: str | None  #: ``src:<source>:<the source's session id>`` of an imported main session
    up: str | None  #: the parent's name or alias, when the session is a sub-agent or a fork


def _count(value: Any) -> int:
    """A token count: a non-negative integer, else nothing (0)."""
    return value if type(value) is int and value > 0 else 0


def _sub(d: Mapping[str, Any], key: str, inner: str) -> int:
    v = d.get(key)
    return _count(v.get(inner)) if isinstance(v, Mapping) else 0


def _apart(total: int, part: int) -> tuple[int, int]:
    """``total`` that includes ``part``, split into (the rest, the part); a part larger than its
    total (a source's rounding, a hand-written file) is capped at it."""
    part = min(part, total)
    return total - part, part


def read_tokens(
    usage: Mapping[str, Any], source: str | None = None, imp: Mapping[str, Any] | None = None
) -> Tokens:
    """The six counts of ``usage`` (``data.usage``) by its dialect; ``source`` is the import's
    ``data.import.source`` (None for a native session), ``imp`` its ``data.import``."""
    u = usage
    if (
        source == "codex"
        or "cached_input_tokens" in u
        or "reasoning_output_tokens" in u
        or isinstance(u.get("input_tokens_details"), Mapping)
    ):
        # OpenAI Responses (Codex): input_tokens includes the cached ones, output_tokens the
        # reasoning ones.
        cached = _count(u.get("cached_input_tokens")) or _sub(
            u, "input_tokens_details", "cached_tokens"
        )
        thought = _count(u.get("reasoning_output_tokens")) or _sub(
            u, "output_tokens_details", "reasoning_tokens"
        )
        inp, cached = _apart(_count(u.get("input_tokens")), cached)
        out, thought = _apart(_count(u.get("output_tokens")), thought)
        return Tokens(input=inp, output=out, cache_read=cached, reasoning=thought)
    if source in _GEMINI:
        # Gemini's promptTokenCount (imported as input_tokens) includes the cached content;
        # the tokens of tool-use prompts are input too; thoughts are counted apart from output.
        inp, cached = _apart(
            _count(u.get("input_tokens")), _count(u.get("cache_read_input_tokens"))
        )
        return Tokens(
            input=inp + _count(u.get("tool_use_prompt_tokens")),
            output=_count(u.get("output_tokens")),
            cache_read=cached,
            reasoning=_count(u.get("reasoning_tokens")),
        )
    if "prompt_tokens" in u or "completion_tokens" in u:
        # OpenAI Chat Completions: prompt_tokens includes the cached ones, completion_tokens
        # the reasoning ones; LiteLLM (OpenHands) adds Anthropic's cache writes under their
        # name, and its prompt_tokens is the whole prompt, those included.
        rest, cached = _apart(
            _count(u.get("prompt_tokens")), _sub(u, "prompt_tokens_details", "cached_tokens")
        )
        inp, written = _apart(rest, _count(u.get("cache_creation_input_tokens")))
        out, thought = _apart(
            _count(u.get("completion_tokens")),
            _sub(u, "completion_tokens_details", "reasoning_tokens"),
        )
        return Tokens(input=inp, output=out, cache_5m=written, cache_read=cached, reasoning=thought)
    if isinstance(u.get("input_token_details"), Mapping) or isinstance(
        u.get("output_token_details"), Mapping
    ):
        # LangChain's usage_metadata: input_tokens includes cache reads and writes,
        # output_tokens the reasoning ones.
        total_in = _count(u.get("input_tokens"))
        rest, cached = _apart(total_in, _sub(u, "input_token_details", "cache_read"))
        inp, written = _apart(rest, _sub(u, "input_token_details", "cache_creation"))
        out, thought = _apart(
            _count(u.get("output_tokens")), _sub(u, "output_token_details", "reasoning")
        )
        return Tokens(input=inp, output=out, cache_5m=written, cache_read=cached, reasoning=thought)
    if source in _WHOLE_PROMPT or (
        source in _CLINES and isinstance(imp, Mapping) and imp.get("input_includes_cache") is True
    ):
        # Goose's input_tokens are the whole prompt, its cache reads and writes included (its
        # Anthropic reader adds them up); so are Cline 4's inputTokens and the tokensIn of a
        # Roo Code / Kilo Code request sent by the OpenAI protocol (apiProtocol "openai").
        t = _anthropic(u)
        rest, read = _apart(t.input, t.cache_read)
        inp, written = _apart(rest, t.cache_5m + t.cache_1h)
        return t._replace(input=inp, cache_5m=written, cache_1h=0, cache_read=read)
    if source == "continue":
        # Continue's completionTokens (imported as output_tokens) include the reasoning ones,
        # as OpenAI's completion_tokens and Anthropic's output_tokens do; the rest is
        # Anthropic's names (the importer takes the cache out of the input, B.15).
        t = _anthropic(u)
        out, thought = _apart(t.output, t.reasoning)
        return t._replace(output=out, reasoning=thought)
    return _anthropic(u)


def _anthropic(u: Mapping[str, Any]) -> Tokens:
    """Anthropic's names (Claude Code, pi, OpenCode, and the format's own default): input
    without the cache, cache writes by duration when the source says."""
    written = _count(u.get("cache_creation_input_tokens"))
    one_hour = 0
    split = u.get("cache_creation")
    if isinstance(split, Mapping):
        five = _count(split.get("ephemeral_5m_input_tokens"))
        one_hour = _count(split.get("ephemeral_1h_input_tokens"))
        written = max(written, five + one_hour)  # what the split does not name is 5-minute
    return Tokens(
        input=_count(u.get("input_tokens")),
        output=_count(u.get("output_tokens")),
        cache_5m=written - one_hour,
        cache_1h=one_hour,
        cache_read=_count(u.get("cache_read_input_tokens")),
        reasoning=_count(u.get("reasoning_tokens")),
    )


def tier_of(prompt: int) -> int:
    """How many of :data:`THRESHOLDS` a prompt of this size passed."""
    return sum(1 for t in THRESHOLDS if prompt > t)


#: Imports whose usage is Gemini's ``usageMetadata`` (Qwen Code is a fork of Gemini CLI).
_GEMINI = frozenset({"gemini-cli", "qwen-code"})
#: Imports whose ``input_tokens`` always include the cache reads and writes (B.18).
_WHOLE_PROMPT = frozenset({"goose"})
#: The task-folder importers (B.17): their input includes the cache when the import says so.
_CLINES = frozenset({"cline", "roo-code", "kilo-code"})
#: Imports whose ``message.id`` is the source's own id of the response (the API message id of
#: Claude Code, the record id of Gemini CLI, the message id of OpenCode, Amp's thread id and
#: message index, Copilot CLI's model call id, else its message id: the importer makes none up).
_OWN_IDS = frozenset({"claude-code", "gemini-cli", "opencode", "amp", "copilot-cli"})
#: Imports whose ``message.id`` is the source's own id when the source gave one, and then is
#: in ``import.ids`` too (else the importer made it up): Qwen Code's record uuid, Kimi CLI's
#: response id (``StatusUpdate.message_id``), OpenHands's LLM response id (else its event id),
#: the provider's response id of a Cline / Roo Code / Kilo Code task (Cline 4: the message's
#: own id), Goose's message id, Cursor's bubble id.
_LISTED_IDS = frozenset({"qwen-code", "kimi-cli", "openhands", *_CLINES, "goose", "cursor"})
#: Imports whose message ids are unique only within their session (Factory Droid's).
_SESSION_IDS = frozenset({"factory-droid"})


def _key(
    session_id: str, fork: bool, seq: int, crc: str, data: Mapping[str, Any], key: str | None
) -> str:
    imp = data.get("import")
    if isinstance(imp, Mapping) and isinstance(imp.get("source"), str):
        source: str = imp["source"]
        message = data.get("message")
        mid = message.get("id") if isinstance(message, Mapping) else None
        listed = imp.get("ids")
        ids = [i for i in listed if isinstance(i, str) and i] if isinstance(listed, list) else []
        if isinstance(mid, str) and mid:
            if source in _OWN_IDS or (source in _LISTED_IDS and mid in ids):
                return f"{source}:{mid}"
            if source in _SESSION_IDS:
                return f"{source}:{session_id}:{mid}"
        rid = imp.get("response_id")
        if source == "copilot-vscode" and isinstance(rid, str) and rid:
            # the request's responseId: a request's tokens are on its first reply only
            return f"copilot-vscode:{rid}"
        if source == "continue" and ids and not ids[-1].startswith("continue-"):
            # the id of the history item that carries the usage (the reply's last; its
            # thinking items come before it); ``continue-<line>`` is one the importer made up
            return f"continue:{ids[-1]}"
        if source == "codex" and ids:
            # Codex 0.15x's token_usage_record names the response (``resp_…``); else the ids
            # of its items (``rs_…``, ``msg_…``), which a forked rollout copies as they are
            return "codex:" + next((i for i in ids if i.startswith("resp")), ids[0])
        if source == "pi" and isinstance(mid, str) and not mid.startswith("pi-"):
            # pi's entry ids are 8 hex digits: with the entry's time they name it
            return f"pi:{mid}:{imp.get('time')}"
        lines = imp.get("lines")
        first = lines[0] if isinstance(lines, list) and lines else seq
        return f"{source}:{session_id}:{first}"  # no id: the session's first source line
    origin = data.get("origin")
    if (
        isinstance(origin, Mapping)
        and isinstance(origin.get("session"), str)
        and type(origin.get("seq")) is int
    ):
        return f"{origin['session']}:{origin['seq']}"  # merged from a fork (spec §8.7.9)
    if key is not None and key.startswith("branch:"):
        # adopted from another version of this file (spec §8.7.14): the line it copies
        _, crc_, seq_ = (key.split(":") + ["", ""])[:3]
        if (number := ascii_int(seq_)) is not None:
            seq, crc = number, crc_
    # A fork's own lines are keyed as its merged copies name them (no crc); any other line by
    # its identity, so that two versions of a file kept in git never share a key.
    return f"{session_id}:{seq}" if fork else f"{session_id}:{seq}:{crc}"


def response_of(
    session_id: str,
    fork: bool,
    type_: str,
    seq: int,
    time: int,
    crc: str,
    data: Mapping[str, Any],
    key: str | None = None,
) -> Response | None:
    """The usage row of one event, or None (not a response with tokens). ``fork``: the
    session's header has a ``parent``; ``crc`` is the line's ``crc`` member. A ``branch/event``
    (spec §8.7.14) gives the row of the response it records, keyed by that line's identity."""
    if type_ == "branch/event":
        line, origin = data.get("line"), data.get("origin")
        if not isinstance(line, Mapping) or not isinstance(origin, Mapping):
            return None
        inner = line.get("data")
        o_seq, o_crc, o_time = origin.get("seq"), origin.get("crc"), line.get("time")
        if (
            line.get("type") != "assistant/message"
            or not isinstance(inner, Mapping)
            or type(o_seq) is not int
            or not isinstance(o_crc, str)
            or type(o_time) is not int
        ):
            return None
        key = line.get("key") if isinstance(line.get("key"), str) else None
        return response_of(session_id, fork, "assistant/message", o_seq, o_time, o_crc, inner, key)
    if type_ != "assistant/message":
        return None
    usage = data.get("usage")
    if not isinstance(usage, Mapping):
        return None
    imp = data.get("import")
    source = imp.get("source") if isinstance(imp, Mapping) else None
    tokens = read_tokens(
        usage,
        source if isinstance(source, str) else None,
        imp if isinstance(imp, Mapping) else None,
    )
    if not tokens.total:
        return None  # nothing billed: an API error, a synthetic reply
    model = data.get("model")
    return Response(
        rkey=_key(session_id, fork, seq, crc, data, key),
        time=time,
        model=model if isinstance(model, str) else "",
        tokens=tokens,
        tier=tier_of(tokens.prompt),
        fast=usage.get("speed") == "fast",
    )


def session_links(session_id: str, parent: str | None, meta: Mapping[str, Any] | None) -> Links:
    """The names of a session in the sub-agent tree, from its header: its id, the source's
    session id (an imported main session), and its parent's name: the header's ``parent`` (a
    Claude Code sidechain, a fork), a Claude Code agent file's ``sidechain_of``, an OpenCode
    child session's ``parent``, or the session directory a Gemini CLI subagent's file is in."""
    name = f"id:{session_id}"
    imp = meta.get("import") if isinstance(meta, Mapping) else None
    if not isinstance(imp, Mapping) or not isinstance(imp.get("source"), str):
        return Links(name, None, f"id:{parent}" if parent else None)
    source: str = imp["source"]
    own = imp.get("session")
    sub_of: str | None = None
    if isinstance(imp.get("sidechain_of"), str):
        sub_of = imp["sidechain_of"]
    elif source == "opencode" and isinstance(imp.get("parent"), str):
        sub_of = imp["parent"]
    elif source == "gemini-cli" and isinstance(imp.get("file"), str):
        folder = os.path.dirname(imp["file"])
        if os.path.basename(os.path.dirname(folder)) == "chats":
            sub_of = os.path.basename(folder)  # chats/<parent session>/<session>.jsonl
    main = sub_of is None and parent is None and "sidechain" not in imp
    alias = f"src:{source}:{own}" if main and isinstance(own, str) and own else None
    if parent:
        return Links(name, alias, f"id:{parent}")
    return Links(name, alias, f"src:{source}:{sub_of}" if sub_of else None)
