"""GitHub Copilot CLI sessions (``~/.copilot/session-state/<session id>/events.jsonl``) to
jsonltape.

The CLI is closed source; its event log is the public schema of github/copilot-sdk
(``nodejs/src/generated/session-events.ts``, "generated from session-events.schema.json",
commit cc0438d66e3e): one JSON event a line, ``{type, data, id, timestamp, parentId, agentId?,
ephemeral?}``; events the schema marks ``ephemeral`` (streaming deltas, ``assistant.usage``,
``session.title_changed``, …) are never written. ``$COPILOT_HOME`` moves ``~/.copilot``; the
early layout ``session-state/<id>.jsonl`` is read too (the directory wins when both exist); the
title is ``name:`` in ``workspace.yaml`` beside the log (rewritten in place: a rename is a
``session/title``). ``/rewind`` rewrites the log: a rewritten log is imported as a rewrite
(:mod:`._rewrite`) from the prompt before the first line that changed.

Mapping (each line is kept verbatim on the event it produced, else as ``import/raw``):

* ``session.start``: the header (``sessionId``, ``copilotVersion``, ``producer``, schema
  ``version``, ``startTime``, ``context`` cwd and git) and a ``request/header`` with
  ``selectedModel`` and ``reasoningEffort``; ``session.model_change`` / ``session.resume``
  update it; ``system.message`` role ``system`` is its ``system`` prompt, role ``developer`` a
  ``user/message`` with role ``system``;
* ``user.message``: a prompt starting a turn, its text what the model saw
  (``transformedContent``, else ``content``; the title falls back to ``content``), ``blob``
  attachments (and files whose bytes a ``session.binary_asset`` holds) as blobs; delivered as
  ``steering`` into a running turn it is a message of that turn, after the results of the calls
  it interrupted;
* ``assistant.message``: the chunks of one model call (``apiCallId``, else ``messageId``) are
  one ``assistant/message``: reasoning (``reasoningText``, else the ``assistant.reasoning``
  events before it), the text, a ``tool_call`` per ``toolRequests[]``; ``model``; ``usage``
  ``{output_tokens}`` (``outputTokens``: per-call input tokens are written only as
  ``assistant.usage``, which is ephemeral; ``session.shutdown`` keeps per-model totals, raw);
  ``message.id`` is the call's ``apiCallId``, ``import.ids`` the ``messageId`` s,
  ``import.request_id`` the ``requestId``;
* ``tool.execution_complete``: the ``tool/result`` of its call: ``result.content`` (what the
  CLI sends the model), or ``error.message`` when ``success`` is false (an error);
* ``abort``: the turn ends ``aborted``;
* ``session.compaction_start`` / ``session.compaction_complete``: a compaction of what the
  surface held at the start (messages added while it ran stay after it), its summary
  ``summaryContent``; a failed one ends with its ``error``;
* ``session.context_cleared``: every message is retracted (reason ``cleared``);
* events with an ``agentId`` (a sub-agent's, else the deprecated ``parentToolCallId``) go to a
  session of their own, ``<main id>.sidechain-<agent id>``, forked from the main one, with
  ``meta.import.spawned_by`` the spawning tool call;
* everything else the schema persists (``assistant.turn_start``/``turn_end``, which are model
  calls of the agent loop, not turns; ``tool.execution_start``; ``subagent.*``; ``hook.*``;
  ``session.shutdown``, ``session.usage_checkpoint``, ``session.truncation``, …) is
  ``import/raw``. A turn is never marked ended: the next prompt, an abort or a settled source
  ends it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ._agent import Agent, Home, split_take
from ._base import Group, Mapper, Out
from ._document import NOFOLLOW
from ._parts import blob_part, json_arguments, reasoning_part, text_part, tool_call_part
from ._source import SourceLine, parse_time

__all__ = ["AGENTS", "CopilotCliMapper", "name_of", "take", "title_of"]


EVENTS = "events.jsonl"
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
#: Event types the schema persists that map to nothing of their own (kept as ``import/raw``).
_KNOWN_RAW = frozenset(
    {
        "assistant.turn_start",
        "assistant.turn_end",
        "tool.execution_start",
        "tool.user_requested",
        "tool_search.activated",
        "external_tool.requested",
        "external_tool.completed",
        "hook.start",
        "hook.end",
        "permission.requested",
        "permission.completed",
        "skill.invoked",
        "subagent.started",
        "subagent.completed",
        "subagent.failed",
        "subagent.selected",
        "subagent.deselected",
        "system.notification",
        "session.binary_asset",
        "session.auto_mode_resolved",
        "session.autopilot_objective_changed",
        "session.canvas.recorded",
        "session.canvas.removed",
        "session.context_changed",
        "session.error",
        "session.handoff",
        "session.info",
        "session.warning",
        "session.mode_changed",
        "session.permissions_changed",
        "session.plan_changed",
        "session.remote_steerable_changed",
        "session.schedule_created",
        "session.schedule_cancelled",
        "session.schedule_rearmed",
        "session.session_limits_changed",
        "session.shutdown",
        "session.task_complete",
        "session.truncation",
        "session.usage_checkpoint",
        "session.workspace_file_changed",
        "session.resume",
        "session.snapshot_rewind",
        # mapped, but kept raw when they change nothing (a repeat, nothing to compact, ...)
        "session.start",
        "session.model_change",
        "session.compaction_start",
        "session.compaction_complete",
        "session.context_cleared",
        "system.message",
        "user.message",
        "assistant.reasoning",
        "tool.execution_complete",
        "abort",
    }
)


# -- layout ---------------------------------------------------------------------------------


def take(path: Path) -> bool | str:
    """``<id>/events.jsonl``, or an early ``<id>.jsonl`` of ``session-state`` (skipped when
    ``<id>/events.jsonl`` holds the same session)."""
    if "history-session-state" in path.parts:
        return "a pre-0.0.342 Copilot CLI session (history-session-state): not read"
    if path.name == EVENTS:
        return True
    if path.suffix == ".jsonl" and _UUID.match(path.stem) and path.parent.name == "session-state":
        if (path.parent / path.stem / EVENTS).exists():
            return f"the same session as {path.stem}/{EVENTS}, which is imported"
        return True
    return False


def name_of(path: Path) -> str:
    """``<id>/events.jsonl`` is known as ``<id>.jsonl``, as the early layout named it."""
    return f"{path.parent.name}.jsonl" if path.name == EVENTS else path.name


def title_of(path: Path) -> str | None:
    """``name:`` in the ``workspace.yaml`` beside the log (a plain or quoted scalar)."""
    yaml = path.parent / "workspace.yaml" if path.name == EVENTS else path.with_suffix(".yaml")
    try:  # never through a symlink; a FIFO reads as empty instead of blocking
        fd = os.open(yaml, NOFOLLOW)
        with open(fd, "rb") as f:
            text = f.read(1 << 16).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if not line.startswith("name:"):
            continue
        value = line[5:].strip()
        if value.startswith('"'):
            try:
                decoded = json.loads(value)
            except ValueError:
                return None
            return decoded if isinstance(decoded, str) and decoded.strip() else None
        if value.startswith("'") and value.endswith("'") and len(value) > 1:
            value = value[1:-1].replace("''", "'")
        elif value.startswith(("|", ">", "&", "*", "!", "[", "{")):
            return None  # not a plain one-line scalar
        else:
            value = value.split(" #", 1)[0].strip()
        return value or None
    return None


# -- mapping --------------------------------------------------------------------------------


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


class CopilotCliMapper(Mapper):
    source = "copilot-cli"
    implicit_end = True
    rewrites = True
    known_raw = _KNOWN_RAW

    @staticmethod
    def rewrite_start(value: dict[str, Any]) -> bool:
        return value.get("type") == "user.message" and not value.get("agentId")

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = "copilot-cli"
        self._started = False
        #: reasoning events waiting for their model call's message, per session
        self.reasoning: dict[str, list[str]] = {}
        #: binary assets by id: (base64 data, mime type)
        self.assets: dict[str, tuple[str, str]] = {}
        #: steering messages waiting for the results of the calls they interrupted (their
        #: lines are kept raw where they are; the message follows the results)
        self.waiting: dict[str, list[tuple[SourceLine, int, dict[str, Any]]]] = {}

    def sniff(self, value: dict[str, Any]) -> str | None:
        t = value.get("type")
        if isinstance(t, str) and "." in t and isinstance(value.get("data"), dict):
            return None
        if "payload" in value:
            return "this looks like a Codex rollout (use --from codex)"
        if "uuid" in value:
            return "this looks like a Claude Code transcript (use --from claude-code)"
        return "not a Copilot CLI event log (no type.name and data object)"

    def rewound(self, k: int) -> None:
        self.reasoning.clear()
        self.waiting.clear()

    # -- sessions ---------------------------------------------------------------------------

    def _out(self, v: dict[str, Any]) -> Out:
        """The session of an event: a sub-agent's (``agentId``, else the deprecated
        ``parentToolCallId``) or the main one."""
        data = v.get("data")
        agent = v.get("agentId")
        parent = data.get("parentToolCallId") if isinstance(data, dict) else None
        key = agent if isinstance(agent, str) and agent else parent
        if not isinstance(key, str) or not key:
            return self.main
        out = self.outs.get(f"sidechain-{key}")
        if out is None:
            meta = {"spawned_by": parent} if isinstance(parent, str) and parent else {}
            out = self.side_out(key, meta, None)
        return out

    def handle(self, v: dict[str, Any]) -> None:
        self.time = parse_time(v.get("timestamp")) or self.time
        t = v.get("type")
        d = v.get("data")
        if not isinstance(d, dict):
            return
        if t == "session.start":
            self._start(d)
            return
        out = self._out(v)
        if t == "user.message":
            self._user(out, v, d)
        elif t == "assistant.reasoning":
            if isinstance(d.get("content"), str) and d["content"]:
                self.reasoning.setdefault(out.target.name, []).append(d["content"])
            self.raw_line("assistant.reasoning", known=True)  # its text goes into the reply
        elif t == "assistant.message":
            self._assistant(out, d)
        elif t == "tool.execution_complete":
            self._result(out, d)
        elif t == "abort":
            self.end_turn(out, "aborted", {"code": str(d.get("reason") or "abort")}, raw=True)
        elif t == "session.model_change":
            effort = d.get("reasoningEffort")
            params = {"reasoning_effort": effort if isinstance(effort, str) else None}
            model = d.get("newModel")
            self.set_request(out, raw=True, model=model if isinstance(model, str) else None,
                             params=params)  # fmt: skip
        elif t == "system.message":
            self._system(out, d)
        elif t == "session.compaction_start":
            self.start_compaction(out, _str(d.get("trigger")), _count(d.get("currentTokens")))
        elif t == "session.compaction_complete":
            self._compacted(out, v, d)
        elif t == "session.context_cleared":
            self._cleared(out)
        elif t == "session.binary_asset" and isinstance(d.get("data"), str):
            self.assets[str(d.get("assetId"))] = (d["data"], str(d.get("mimeType") or ""))

    def _start(self, d: dict[str, Any]) -> None:
        target = self.main.target
        if self._started:
            self.raw_line("session.start", known=True)  # a copy (a resumed or forked log)
            return
        self._started = True
        info: dict[str, Any] = {}
        for src, dst in (("sessionId", "session"), ("copilotVersion", "version"),
                         ("producer", "producer"), ("version", "schema")):  # fmt: skip
            if isinstance(d.get(src), (str, int)) and not isinstance(d.get(src), bool):
                info[dst] = d[src]
        context = d.get("context")
        if isinstance(context, dict):
            if isinstance(context.get("cwd"), str) and context["cwd"]:
                target.cwd = context["cwd"]
            keys = ("gitRoot", "branch", "headCommit", "baseCommit", "repository")
            git = {k: context[k] for k in keys if isinstance(context.get(k), str)}
            if git:
                info["git"] = git
        target.meta["import"] = info
        if isinstance(d.get("copilotVersion"), str):
            target.agent = f"copilot-cli/{d['copilotVersion']}"
        target.created = parse_time(d.get("startTime")) or self.time or None
        effort = d.get("reasoningEffort")
        self.set_request(
            self.main, raw=True, model=_str(d.get("selectedModel")),
            params={"reasoning_effort": effort if isinstance(effort, str) else None},
        )  # fmt: skip
        if not self._claimed:
            self.raw_line("session.start", known=True)

    def _system(self, out: Out, d: dict[str, Any]) -> None:
        content = d.get("content")
        if not isinstance(content, str):
            raise ValueError("system.message: content is not text")
        if d.get("role") == "developer":
            self.message(out, "user/message", "system", [text_part(content)], f"copilot-{self.n}")
        else:
            self.set_request(out, raw=True, system=content)
            if not self._claimed:
                self.raw_line("system.message", known=True)  # the same prompt again

    # -- messages ---------------------------------------------------------------------------

    def _user(self, out: Out, v: dict[str, Any], d: dict[str, Any]) -> None:
        content = d.get("content")
        if not isinstance(content, str):
            raise ValueError("user.message: content is not text")
        steering = d.get("delivery") == "steering" and out.turn is not None
        if steering:
            self.flush_group(out)  # its calls are the ones the message may wait for
        if steering and out.pending and not self._claimed:
            assert self.line is not None
            self.waiting.setdefault(out.target.name, []).append((self.line, self.time, v))
            self.raw_line("user.message", known=True)
            return
        shown = d.get("transformedContent")
        parts = [text_part(shown if isinstance(shown, str) and shown else content)]
        for a in d.get("attachments") or ():
            part = self._attachment(a)
            if part is not None:
                parts.append(part)
        if not steering:
            self.start_turn(out)
        if out is not self.main or not d.get("source"):  # not a skill's or an agent's prompt
            self.note_title(out, content)
        msg_id = d.get("interactionId") if isinstance(d.get("interactionId"), str) else None
        self.message(out, "user/message", "user", parts, str(v.get("id") or msg_id or self.n))

    def _attachment(self, a: Any) -> dict[str, Any] | None:
        if not isinstance(a, dict):
            return None
        mime: str = a["mimeType"] if isinstance(a.get("mimeType"), str) else ""
        if a.get("type") == "blob" and isinstance(a.get("data"), str):
            return blob_part(a["data"], mime, mime.split("/")[0] if "/" in mime else "file")
        asset = self.assets.get(a["assetId"]) if isinstance(a.get("assetId"), str) else None
        if asset is not None:
            data, kind = asset
            mime = mime or kind
            return blob_part(data, mime, mime.split("/")[0] if "/" in mime else "file")
        return None

    def _assistant(self, out: Out, d: dict[str, Any]) -> None:
        call = d.get("apiCallId") if isinstance(d.get("apiCallId"), str) else None
        mid = call or d.get("messageId")
        if not isinstance(mid, str) or not mid:
            raise ValueError("assistant.message without a messageId")
        if out.turn is None:
            self.start_turn(out)
        g: Group = self.group_for(out, mid)
        self.add_line(g, d["messageId"] if isinstance(d.get("messageId"), str) else None)
        pending = self.reasoning.pop(out.target.name, [])
        text = d.get("reasoningText")
        for r in [text] if isinstance(text, str) and text else pending:
            g.parts.append(reasoning_part(r))
        if isinstance(d.get("content"), str) and d["content"]:
            g.parts.append(text_part(d["content"]))
        for req in d.get("toolRequests") or ():
            if isinstance(req, dict) and isinstance(req.get("toolCallId"), str):
                args = json_arguments(req.get("arguments"))
                name = str(req.get("name"))
                g.parts.append(
                    tool_call_part(req["toolCallId"], name, {} if args is None else args)
                )
        model = _str(d.get("model")) or _str(out.request.get("model"))
        g.model = model
        tokens = _count(d.get("outputTokens"))
        if tokens is not None:
            g.usage = {"output_tokens": tokens}
        if isinstance(d.get("requestId"), str):
            g.extra["request_id"] = d["requestId"]

    def _result(self, out: Out, d: dict[str, Any]) -> None:
        call = d.get("toolCallId")
        if not isinstance(call, str):
            raise ValueError("tool.execution_complete without a toolCallId")
        self.flush_group(out)
        if call not in out.pending:
            self.raw_line("tool.execution_complete", known=True)  # no call of the model's
            return
        result: dict[str, Any] = d["result"] if isinstance(d.get("result"), dict) else {}
        error: dict[str, Any] = d["error"] if isinstance(d.get("error"), dict) else {}
        ok = d.get("success") is not False
        response = result.get("content") if ok else error.get("message", result.get("content"))
        extra = {"error": {"code": str(error.get("code") or "tool-error"),
                           "message": str(error.get("message"))}} if error else None  # fmt: skip
        self.tool_result(
            out, call, response if isinstance(response, str) else "", is_error=not ok,
            msg_id=f"{call}-result", tag=f"result:{call}", extra=extra,
        )  # fmt: skip
        if not out.pending:
            self._steered(out)

    def _steered(self, out: Out) -> None:
        """The steering messages that waited for the calls they interrupted (their lines
        are already kept raw)."""
        waiting = self.waiting.pop(out.target.name, [])
        current = self.line, self.time, self._claimed
        try:
            for line, time, v in waiting:
                self.line, self.time, self._claimed = line, time, True
                self._user(out, v, v["data"])
        finally:
            self.line, self.time, self._claimed = current

    # -- compaction -------------------------------------------------------------------------

    def _compacted(self, out: Out, v: dict[str, Any], d: dict[str, Any]) -> None:
        if out.compaction is None and not self.start_compaction(
            out, _str(d.get("trigger")), _count(d.get("preCompactionTokens"))
        ):
            if not self._claimed:
                self.raw_line("session.compaction_complete", known=True)  # nothing to compact
            return
        summary = d.get("summaryContent")
        if d.get("success") is False or not isinstance(summary, str):
            why = str(d.get("error") or "the compaction failed")
            self.end_compaction(out, "COMPACTION_FAILED", why)
            self.raw_line("session.compaction_complete", known=True)
            return
        self.finish_compaction(out, summary, str(v.get("id") or f"copilot-{self.n}"))

    def _cleared(self, out: Out) -> None:
        self.flush_group(out)
        self.end_turn(out, "completed", tag="cleared:end")
        nodes = out.surface.nodes
        if nodes and self.refusal(out, nodes) is None:
            self.retract(out, nodes, "cleared", "cleared")
        else:
            self.raw_line("session.context_cleared", known=True)

    def eof(self, settled: bool) -> None:
        if settled:  # calls that never answered: closed, then what steered the turn follows
            for out in list(self.outs.values()):
                if self.waiting.get(out.target.name):
                    self.close_interrupted(out, "eof")
                    self._steered(out)
        super().eof(settled)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


_wanted, _skip = split_take(take)
AGENTS = (
    Agent(
        "copilot-cli",
        "GitHub Copilot CLI",
        CopilotCliMapper,
        (Home(("linux", "darwin", "win32"), "${COPILOT_HOME:-~/.copilot}/session-state"),),
        "<id>/events.jsonl, <id>.jsonl",
        _wanted,
        skip=_skip,
        name_of=name_of,
        title_of=title_of,
    ),
)
