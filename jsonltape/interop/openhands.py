"""OpenHands conversations (``~/.openhands/conversations/<id>/``: ``base_state.json`` and
``events/event-<index>-<id>.json``) to jsonltape.

:mod:`._openhands_store` renders each conversation as records: its id, then its events in
index order. The events are the OpenHands SDK's (OpenHands/software-agent-sdk
openhands-sdk/openhands/sdk/event/), each ``{id, timestamp, source, parent_id?, kind, ...}``
with ``kind`` the class name; the model's history is their LLM messages
(``LLMConvertibleEvent.events_to_messages``), as the conversation's view gives it after its
condensations (``View``, ``Condensation.apply``).

Mapping (each record is kept verbatim on the event it produced, else as ``import/raw``):

* ``SystemPromptEvent``: a ``request/header`` with ``system`` (the prompt, then its
  ``dynamic_context``) and the ``tools`` (name and description).
* ``MessageEvent`` from the user: a prompt, ``user/message`` (text and image URLs, then its
  ``extended_content``) starting a turn; the first one titles the session unless an agent
  server's ``meta.json`` has a ``title``. From the agent: an ``assistant/message``
  (``reasoning_content``, else the ``thinking_blocks``, as reasoning, never signed: which
  provider answered is not recorded; its text).
* ``ActionEvent`` s of one model response (consecutive, the same ``llm_response_id``): one
  ``assistant/message`` (the first one's ``thought`` text and reasoning, a ``tool_call`` per
  ``tool_call``), as ``_combine_action_events`` sends it; a ``tool/call`` per call.
* ``ObservationEvent``: its ``tool/result`` (the observation's text, after OpenHands'
  ``[An error occurred during execution.]`` header when ``is_error``);
  ``UserRejectObservation``: ``Action rejected: <reason>``; ``AgentErrorEvent``: its ``error``;
  both ``is_error``.
* A response's ``message.id`` is its ``llm_response_id`` (the provider's response id, also in
  ``import.ids``); its ``usage`` is what the ``stats`` ``ConversationStateUpdateEvent`` before
  it (OpenHands emits one after each model call) adds to the accumulated usage of the
  conversation's LLMs (``prompt_tokens``, ``completion_tokens``, ``cache_read_tokens`` as
  ``prompt_tokens_details.cached_tokens``, ``reasoning_tokens`` as
  ``completion_tokens_details.reasoning_tokens``, ``cache_write_tokens`` as
  ``cache_creation_input_tokens``: LiteLLM's names), its model that LLM's ``model_name``.
* ``Condensation`` ``{forgotten_event_ids, summary?}``: the forgotten messages leave the
  surface, a compaction whose summary takes their place when there is one (a
  ``surface/retract`` with reason ``condensation`` when not); forgotten messages that are not
  one run of the surface are reported and left in place.
* ``execution_status`` updates end the running turn: ``finished`` → ``completed``, ``error``
  and ``stuck`` → ``error``, ``paused`` → ``aborted``.
* ``parent_id`` (the conversation tree): an event that continues from an earlier one than the
  last retracts the messages of the branch left. Everything else (state updates,
  ``PauseEvent``, hook and log events, ``CondensationRequest``) stays raw. Timestamps carry no
  zone: they are read in this machine's local time, as OpenHands wrote them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ._agent import Agent, Home
from ._base import Group, Mapper, Out
from ._openhands_store import is_conversation_file
from ._openhands_store import units as conversations
from ._parts import data_url, json_arguments, reasoning_part, text_part, tool_call_part
from ._source import parse_time

__all__ = ["AGENTS", "OpenHandsMapper"]

#: What OpenHands puts before an observation's content when the tool failed
#: (``Observation.ERROR_MESSAGE_HEADER``).
ERROR_HEADER = "[An error occurred during execution.]\n"
_ROOT = "__root__"  # ``ROOT_PARENT_ID``: a tree root created after ``navigate_to(None)``
_USAGE = (
    ("prompt_tokens", "prompt_tokens"),
    ("completion_tokens", "completion_tokens"),
)
_ENDS = {"finished": "completed", "error": "error", "stuck": "error", "paused": "aborted"}
_RESULTS = frozenset({"ObservationEvent", "UserRejectObservation", "AgentErrorEvent"})


def event_time(value: Any) -> int | None:
    """An event's ``timestamp``: ISO 8601, usually without a zone (``datetime.now()``): then
    in this machine's local time."""
    ms = parse_time(value)
    if ms is not None or not isinstance(value, str):
        return ms
    try:
        return int(datetime.fromisoformat(value.strip()).timestamp() * 1000)
    except (ValueError, OverflowError, OSError):
        return None


def content_parts(content: Any) -> list[dict[str, Any]]:
    """``TextContent`` / ``ImageContent`` items as parts."""
    parts: list[dict[str, Any]] = []
    for c in content if isinstance(content, list) else ():
        if not isinstance(c, dict):
            continue
        if c.get("type") == "text" and isinstance(c.get("text"), str):
            parts.append(text_part(c["text"]))
        elif c.get("type") == "image" and isinstance(c.get("image_urls"), list):
            parts.extend(data_url(u, "image") for u in c["image_urls"] if isinstance(u, str))
    return parts


def _text(content: Any) -> str:
    return "".join(p["content"] for p in content_parts(content) if p["type"] == "text")


def _reasoning(holder: dict[str, Any]) -> list[dict[str, Any]]:
    """The reasoning of a response: ``reasoning_content``, else its thinking blocks' text."""
    text = holder.get("reasoning_content")
    if isinstance(text, str) and text:
        return [reasoning_part(text)]
    blocks = holder.get("thinking_blocks")
    texts = (
        [b.get("thinking") for b in blocks if isinstance(b, dict)]
        if isinstance(blocks, list)
        else []
    )
    return [reasoning_part(t) for t in texts if isinstance(t, str) and t]


def _accumulated(value: Any) -> dict[str, tuple[str | None, dict[str, Any]]]:
    """A ``stats`` update's accumulated usage per LLM: usage id -> (model, token counts)."""
    metrics = value.get("usage_to_metrics") if isinstance(value, dict) else None
    found = {}
    for uid, m in metrics.items() if isinstance(metrics, dict) else ():
        acc = m.get("accumulated_token_usage") if isinstance(m, dict) else None
        if isinstance(acc, dict):
            model = m.get("model_name") if isinstance(m.get("model_name"), str) else None
            found[str(uid)] = (model, acc)
    return found


def _delta(now: dict[str, Any], before: dict[str, Any] | None) -> dict[str, Any] | None:
    """The usage one model call added (LiteLLM's names), or None when it added nothing."""
    keys = (
        "prompt_tokens",
        "completion_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
    )
    diff = {}
    for k in keys:
        a, b = now.get(k), (before or {}).get(k, 0)
        if type(a) is int and type(b) is int and a - b > 0:
            diff[k] = a - b
    if not diff:
        return None
    usage: dict[str, Any] = {k: diff.get(k, 0) for k, _ in _USAGE}
    if "cache_read_tokens" in diff:
        usage["prompt_tokens_details"] = {"cached_tokens": diff["cache_read_tokens"]}
    if "reasoning_tokens" in diff:
        usage["completion_tokens_details"] = {"reasoning_tokens": diff["reasoning_tokens"]}
    if "cache_write_tokens" in diff:
        usage["cache_creation_input_tokens"] = diff["cache_write_tokens"]
    return usage


class OpenHandsMapper(Mapper):
    source = "openhands"
    known_raw = frozenset({"conversation"})
    implicit_end = True

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = "openhands"
        self._last_event: str | None = None  # the previous event's id (legacy: the parent)
        #: accumulated usage per LLM at the latest stats update
        self._acc: dict[str, dict[str, Any]] = {}
        #: what the latest model call cost, for the response that follows it
        self._usage: tuple[str | None, dict[str, Any]] | None = None
        self._batch: str | None = None  # llm_response_id of the open ActionEvent batch
        self._batch_time = 0  # the time of its latest action

    def sniff(self, value: dict[str, Any]) -> str | None:
        if value.get("type") == "conversation":
            return None
        return "not an OpenHands conversation rendering: its first record is not the conversation's"

    def handle(self, v: dict[str, Any]) -> None:
        t = v.get("type")
        out = self.main
        if t == "conversation":
            out.target.meta.setdefault("import", {}).setdefault("session", v.get("id"))
            self.raw_line("conversation", known=True)
            return
        if t == "unreadable":
            self.problems.append((self.n, f"event file {v.get('file')}: {v.get('error')}"))
            self.raw_line("unreadable", known=False)
            return
        kind = v.get("kind")
        if not isinstance(kind, str):
            self.raw_line("(no kind)", known=False)
            return
        self.time = event_time(v.get("timestamp")) or self.time
        if out.target.created is None and self.time:
            out.target.created = self.time
        eid = v.get("id") if isinstance(v.get("id"), str) else None
        parent = v.get("parent_id")
        if not isinstance(parent, str):
            parent = self._last_event  # before the tree: the previous event (a linear chain)
        elif parent == _ROOT:
            parent = None
        self._last_event = eid or self._last_event
        if kind != "ActionEvent" or v.get("llm_response_id") != self._batch:
            self._end_batch(out)
        makes = kind in ("MessageEvent", "ActionEvent") or kind in _RESULTS
        self.branch_to(out, parent, eid, message=makes)
        if kind == "MessageEvent":
            self._message(out, v, eid)
        elif kind == "ActionEvent":
            self._action(out, v, eid)
        elif kind in _RESULTS:
            self._result(out, v, kind, eid)
        elif kind == "SystemPromptEvent":
            self._system(out, v)
        elif kind == "ConversationStateUpdateEvent":
            self._state(out, v)
        elif kind == "Condensation":
            self._condensation(out, v)
        if not self._claimed:
            self.raw_line(kind, known=True)

    # -- events -----------------------------------------------------------------------------

    def _system(self, out: Out, v: dict[str, Any]) -> None:
        pieces = [_text([v.get("system_prompt")]), _text([v.get("dynamic_context")])]
        tools = []
        given = v.get("tools")
        for t in given if isinstance(given, list) else ():
            if isinstance(t, dict) and isinstance(t.get("name"), str):
                tool = {"name": t["name"]}
                if isinstance(t.get("description"), str):
                    tool["description"] = t["description"]
                tools.append(tool)
        system = "\n\n".join(p for p in pieces if p)
        self.set_request(out, raw=True, system=system or None, tools=tools or None)

    def _message(self, out: Out, v: dict[str, Any], eid: str | None) -> None:
        message = v.get("llm_message")
        if not isinstance(message, dict):
            return
        content = list(message.get("content") or []) + list(v.get("extended_content") or [])
        parts = content_parts(content)
        mid = eid or f"line-{self.n}"
        if v.get("source") == "user" or message.get("role") == "user":
            if not parts:
                return
            self.start_turn(out)
            self.note_title(out, _text(message.get("content")))
            vid = self.message(out, "user/message", "user", parts, mid)
            if eid:
                out.entry_vid[eid] = vid
            return
        response = v.get("llm_response_id")
        g = self._response(out, response if isinstance(response, str) else None, mid, eid)
        g.parts.extend(_reasoning(message) + parts)
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                args = json_arguments(call.get("arguments"))
                g.parts.append(tool_call_part(call["id"], str(call.get("name")), args))
        self.flush_group(out)

    def _action(self, out: Out, v: dict[str, Any], eid: str | None) -> None:
        call = v.get("tool_call")
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call["id"]:
            raise ValueError("an ActionEvent without a tool_call id")
        response = v.get("llm_response_id")
        response = response if isinstance(response, str) else None
        g = out.group if self._batch is not None and response == self._batch else None
        if g is None:
            g = self._response(out, response, eid or f"line-{self.n}", eid)
            g.parts.extend(_reasoning(v) + content_parts(v.get("thought")))
            self._batch = response
        else:
            self.add_line(g, eid)
            if eid:
                out.entry_group[eid] = g
        args = json_arguments(call.get("arguments"))
        g.parts.append(tool_call_part(call["id"], str(call.get("name")), args))
        self._batch_time = self.time

    def _response(self, out: Out, response: str | None, mid: str, eid: str | None) -> Group:
        """The message of a model response, with the usage of the call before it."""
        if out.turn is None:
            self.start_turn(out)
        g = self.group_for(out, response or mid)
        self.add_line(g, eid)
        if response:
            g.ids.append(response)
        if eid:
            out.entry_group[eid] = g
        if self._usage is not None:
            g.model, g.usage = self._usage
            self._usage = None
        return g

    def _end_batch(self, out: Out) -> None:
        """Emit the response of the ActionEvent batch the current event ends, at the time of
        its last action."""
        if self._batch is not None:
            self._batch = None
            now, self.time = self.time, self._batch_time
            try:
                self.flush_group(out)
            finally:
                self.time = now

    def _result(self, out: Out, v: dict[str, Any], kind: str, eid: str | None) -> None:
        call = v.get("tool_call_id")
        if not isinstance(call, str) or not call:
            raise ValueError(f"a {kind} without a tool_call_id")
        if kind == "ObservationEvent":
            obs = v.get("observation")
            obs = obs if isinstance(obs, dict) else {}
            is_error = obs.get("is_error") is True
            text = _text(obs.get("content")) + _text(v.get("extended_content"))
            response = (ERROR_HEADER if is_error else "") + text
        elif kind == "UserRejectObservation":
            reason = v.get("rejection_reason")
            response = f"Action rejected: {reason if isinstance(reason, str) else ''}"
            is_error = True
        else:
            response, is_error = str(v.get("error") or ""), True
        vid = self.tool_result(
            out, call, response, is_error=is_error, msg_id=eid or f"line-{self.n}"
        )
        if eid:
            out.entry_vid[eid] = vid

    def _state(self, out: Out, v: dict[str, Any]) -> None:
        key, value = v.get("key"), v.get("value")
        if key == "stats":
            for uid, (model, acc) in _accumulated(value).items():
                usage = _delta(acc, self._acc.get(uid))
                self._acc[uid] = acc
                if usage is not None:
                    self._usage = (model, usage)  # the next response's (a condenser's: none)
        elif key == "execution_status" and value in _ENDS and out.turn is not None:
            error = {"code": str(value)} if _ENDS[str(value)] == "error" else None
            self.end_turn(out, _ENDS[str(value)], error, raw=True)

    def _condensation(self, out: Out, v: dict[str, Any]) -> None:
        """The forgotten events leave the model's view; a summary takes their place."""
        self._usage = None  # the condenser's call: not a response of the conversation
        ids = v.get("forgotten_event_ids")
        nodes = out.surface.nodes
        gone = sorted(
            {n for n in (self._node(out, i) for i in ids or () if isinstance(i, str)) if n},
            key=nodes.index,
        )
        if not gone:
            return
        first = nodes.index(gone[0])
        if nodes[first : first + len(gone)] != gone:
            self.problems.append((self.n, "condensation: the forgotten messages are not one run"))
            return
        summary = v.get("summary")
        eid = v.get("id") if isinstance(v.get("id"), str) else f"line-{self.n}"
        if isinstance(summary, str) and summary.strip():
            if self.start_compaction(out, "condensation", None, start=gone[0], end=gone[-1]):
                self.finish_compaction(out, summary, f"{eid}-summary")
        elif self.refusal(out, gone) is None:
            self.retract(out, gone, "condensation", "condensation")

    def _node(self, out: Out, event: str) -> int | None:
        vid = self._entry_node(out, event)
        return vid if vid is not None and out.surface.is_current(vid) else None


AGENTS = (
    Agent(
        "openhands",
        "OpenHands",
        OpenHandsMapper,
        (Home(("linux", "darwin", "win32"), "~/.openhands/conversations"),),
        "<id>/base_state.json + events/event-*.json",
        is_conversation_file,
        units=conversations,
    ),
)
