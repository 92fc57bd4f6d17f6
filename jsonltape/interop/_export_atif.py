"""``export --format atif``: a session as a trajectory in Harbor's Agent Trajectory Interchange
Format, ATIF-v1.7 (Harbor's RFC 0001 and its pydantic models, ``harbor.models.trajectories``).

The trajectory is the conversation as it happened (the transcript model: current and compacted
messages in seq order), one step per message:

* the request header's system prompt is the first step (``source: system``);
* a ``user/message`` is a ``user`` step (role ``system``: a ``system`` step); its text parts
  are the ``message`` (one text part: a string, else a list of content parts), image ``uri``
  parts of a type ATIF takes are ``image`` parts with the URI as ``path``;
* an ``assistant/message`` is an ``agent`` step: text as above, reasoning parts joined as
  ``reasoning_content``, ``tool_call`` parts as ``tool_calls`` (arguments as the Anthropic
  mapping reads them: an object, a string holding one decoded, else ``{"arguments": ...}``),
  ``model_name``, ``llm_call_count`` 1 and ``metrics`` from its usage (``prompt_tokens``
  counting cached input, ``cached_tokens``, ``completion_tokens``; ``cost_usd`` only where the
  source recorded a cost: nothing is priced here), the usage as logged in ``metrics.extra``;
* each ``tool/result`` is an observation result of the step whose tool call it answers
  (``source_call_id``; the response as text, ``is_error`` and ``error`` in its ``extra``); a
  result whose call no step declares is a ``system`` step of its own;
* sessions forked from or spawned by this one (see :func:`._export_trace.children`) are
  embedded in ``subagent_trajectories`` and referenced (``subagent_trajectory_ref``) from the
  result of the tool call that spawned them, else from a last ``system`` step;
* a fork's inherited messages are steps with ``is_copied_context: true``.

Everything ATIF has no field for is kept in ``extra.jsonltape`` (seqs, message ids, reasoning
signatures, parts that are not text or images, the session's title, cwd, parent) or, where it
cannot be carried at all (earlier versions of revised messages, retracted messages, compaction
boundaries, turns), counted in ``extra.jsonltape.dropped`` and in the one note ``export``
prints. The document is one JSON object built in memory, as the other exports are.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .. import fold, reader
from ..errors import JsonltapeError
from ..events import HeaderData
from ._export_trace import (
    Child,
    Dropped,
    agent_name,
    children,
    image_type,
    import_source,
    iso,
    tokens,
)
from ._transcript import transcript
from .redaction import Redactor

__all__ = ["SCHEMA_VERSION", "atif"]

SCHEMA_VERSION = "ATIF-v1.7"
#: How deep sub-agents of sub-agents are followed (a loop of hand-made headers stops too).
MAX_DEPTH = 16


def atif(
    path: str | os.PathLike[str],
    red: Redactor,
    *,
    parents: dict[str, str | os.PathLike[str]] | None = None,
) -> tuple[dict[str, Any], Dropped]:
    """The trajectory of the session at ``path`` with its sub-agents, and what was dropped."""
    dropped = Dropped()
    embedded: list[dict[str, Any]] = []
    root = _trajectory(Path(path), red, parents, dropped, embedded, (), 0)
    ids = [t["trajectory_id"] for t in embedded]
    embedded = [t for i, t in enumerate(embedded) if t["trajectory_id"] not in ids[:i]]
    if embedded:
        root["subagent_trajectories"] = embedded
    total = root.get("final_metrics", {})
    costs = [t["final_metrics"].get("total_cost_usd") for t in embedded]
    if any(c is not None for c in costs):  # ATIF: the total includes the sub-agents' cost
        own = total.get("total_cost_usd") or 0.0
        total["total_cost_usd"] = own + sum(c for c in costs if c is not None)
        root["final_metrics"] = total
    extra = root.setdefault("extra", {}).setdefault("jsonltape", {})
    if dropped.counts:
        extra["dropped"] = dropped.as_dict()
    return root, dropped


def _trajectory(
    path: Path,
    red: Redactor,
    parents: dict[str, str | os.PathLike[str]] | None,
    dropped: Dropped,
    embedded: list[dict[str, Any]],
    chain: tuple[str, ...],
    depth: int,
) -> dict[str, Any]:
    hdr = reader.header(path)
    model = transcript(path, red, parents=parents)
    source = import_source(hdr)
    request = model.get("request") or {}
    kids, built = _children(path, hdr, red, parents, dropped, chain, depth)
    by_call = {c.spawned_by: c for c in kids if c.spawned_by}
    steps = _Steps(source, dropped, {k: red.text(c.session) for k, c in by_call.items()})
    system = request.get("system") if isinstance(request, dict) else None
    if isinstance(system, str) and system.strip():
        steps.add(
            {"source": "system", "message": system}, model.get("created"), {"request_header": True}
        )
    for entry in model["messages"]:
        steps.message(entry)
    steps.orphans()
    referenced = set(steps.referenced)
    loose = [c for c in kids if red.text(c.session) not in referenced]
    if loose:
        steps.add(
            {
                "source": "system",
                "message": "Sessions forked from or spawned by this session",
                "observation": {"results": [_ref_result(red.text(c.session), c) for c in loose]},
            },
            None,
            {},
        )
    name, version = agent_name(model.get("agent"))
    agent: dict[str, Any] = {"name": name, "version": version}
    if isinstance(request, dict):
        if isinstance(request.get("model"), str):
            agent["model_name"] = request["model"]
        tools = fold.openai_request([], request).get("tools")
        if tools:
            agent["tool_definitions"] = tools
        rest = {k: v for k, v in request.items() if k not in ("model", "system", "tools")}
        if rest:
            agent["extra"] = {"jsonltape": {"request": rest}}
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "session_id": model["id"],
        "trajectory_id": model["id"],
        "agent": agent,
        "steps": steps.steps or [_empty_step(model)],
    }
    out["final_metrics"] = steps.final_metrics()
    out["extra"] = {"jsonltape": _session_extra(model)}
    _count_dropped(model, dropped)
    embedded += built
    return out


def _children(
    path: Path,
    hdr: HeaderData,
    red: Redactor,
    parents: dict[str, str | os.PathLike[str]] | None,
    dropped: Dropped,
    chain: tuple[str, ...],
    depth: int,
) -> tuple[list[Child], list[dict[str, Any]]]:
    """The sessions forked from or spawned by this one that could be read, and their
    trajectories (theirs first, then their own sub-agents'). A sub-agent session that cannot
    be folded is left out and counted, never the end of the export; a session id met twice
    (a copy of a file) is embedded once."""
    kids: list[Child] = []
    built: list[dict[str, Any]] = []
    seen = {hdr.id, *chain}
    for child in children(path, hdr) if depth < MAX_DEPTH else ():
        if child.session in seen:
            continue
        mine: list[dict[str, Any]] = []
        try:
            sub = _trajectory(child.path, red, parents, dropped, mine, (*chain, hdr.id), depth + 1)
        except JsonltapeError:
            dropped.add("sub-agent sessions that could not be read")
            continue
        seen.add(child.session)
        kids.append(child)
        built += [sub, *mine]
    return kids, built


def _empty_step(model: dict[str, Any]) -> dict[str, Any]:
    """ATIF needs at least one step: a session with no message gets a system step saying so."""
    step: dict[str, Any] = {"step_id": 1, "source": "system", "message": "(no messages)"}
    if iso(model.get("created")) is not None:
        step["timestamp"] = iso(model["created"])
    return step


def _session_extra(model: dict[str, Any]) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    for key in ("title", "cwd", "agent", "parent", "source"):
        if model.get(key):
            extra[key] = model[key]
    if iso(model.get("created")) is not None:
        extra["created"] = iso(model["created"])
    return extra


_DROP_WORDS = (
    ("superseded", "earlier versions of revised messages"),
    ("retracted", "retracted messages (abandoned branches)"),
)
_KIND_WORDS = (
    ("compaction/summary", "compaction boundaries (the summary is a step, not what it replaced)"),
    ("compaction/prune", "prune records"),
    ("turn/start", "turn boundaries"),
    ("todo/write", "todo lists"),
    ("branch/start", "branches recorded by a git merge"),
)


def _count_dropped(model: dict[str, Any], dropped: Dropped) -> None:
    hidden = model.get("hidden") or {}
    for key, words in _DROP_WORDS:
        dropped.add(words, int(hidden.get(key, 0)))
    kinds = model.get("kinds") or {}
    for kind, words in _KIND_WORDS:
        dropped.add(words, int(kinds.get(kind, 0)))


def _ref_result(sid: str, child: Child) -> dict[str, Any]:
    ref: dict[str, Any] = {"trajectory_id": sid, "session_id": sid}
    ref["extra"] = {"jsonltape": {"path": child.path.name, "at": child.at}}
    return {"subagent_trajectory_ref": [ref]}


class _Steps:
    """Steps in order, with tool results attached to the step whose call they answer."""

    def __init__(self, source: str | None, dropped: Dropped, spawned: dict[str, str]) -> None:
        self.source = source
        self.dropped = dropped
        self.spawned = spawned  # tool call id -> the session it spawned
        self.steps: list[dict[str, Any]] = []
        self.calls: dict[str, dict[str, Any]] = {}  # call id -> the latest step declaring it
        self.pending: dict[str, list[dict[str, Any]]] = {}  # results before their call
        self.referenced: list[str] = []

    def add(self, step: dict[str, Any], time: Any, extra: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"step_id": len(self.steps) + 1}
        if iso(time) is not None:
            out["timestamp"] = iso(time)
        out.update(step)
        if extra:
            out["extra"] = {"jsonltape": extra}
        self.steps.append(out)
        return out

    def message(self, entry: dict[str, Any]) -> None:
        message = entry.get("message") or {}
        parts = [p for p in message.get("parts") or () if isinstance(p, dict)]
        extra: dict[str, Any] = {"seq": entry["seq"]}
        if isinstance(message.get("id"), str):
            extra["id"] = message["id"]
        if "session" in entry:
            extra["session"] = entry["session"]
        if entry.get("status") == "compacted":
            extra["compacted"] = True
        if entry.get("summary"):
            extra["compaction_summary"] = True
        kind = entry.get("type")
        if kind == "tool/result":
            self._result(entry, parts, extra)
            return
        if kind == "assistant/message":
            self._agent(entry, parts, extra)
            return
        source = "system" if message.get("role") == "system" else "user"
        step: dict[str, Any] = {"source": source, "message": self._content(parts, extra)}
        if "session" in entry:
            step["is_copied_context"] = True
        self.add(step, entry.get("time"), extra)

    def _content(self, parts: list[dict[str, Any]], extra: dict[str, Any]) -> Any:
        """Text and image parts as an ATIF message; any other part kept in ``extra.parts``."""
        out: list[dict[str, Any]] = []
        kept: list[dict[str, Any]] = []
        for i, p in enumerate(parts):
            kind = p.get("type")
            if kind == "text" and isinstance(p.get("content"), str):
                out.append({"type": "text", "text": p["content"]})
                continue
            mime = image_type(p) if kind == "uri" and isinstance(p.get("uri"), str) else None
            if mime is not None:
                out.append({"type": "image", "source": {"media_type": mime, "path": p["uri"]}})
                continue
            if kind in ("reasoning", "tool_call"):
                continue  # an agent step carries these in fields of their own
            kept.append({"index": i, "part": p})
            self.dropped.add(f"{kind} parts (kept in extra.jsonltape.parts)")
        if kept:
            extra["parts"] = kept
        if len(out) == 1 and out[0]["type"] == "text":
            return out[0]["text"]
        return out or ""

    def _agent(
        self, entry: dict[str, Any], parts: list[dict[str, Any]], extra: dict[str, Any]
    ) -> None:
        step: dict[str, Any] = {"source": "agent"}
        if isinstance(entry.get("model"), str):
            step["model_name"] = entry["model"]
        step["message"] = self._content(parts, extra)
        reasoning = [p for p in parts if p.get("type") == "reasoning"]
        texts = [p["content"] for p in reasoning if isinstance(p.get("content"), str)]
        if texts:
            step["reasoning_content"] = "\n\n".join(texts)
        signatures = [p.get("signature") for p in reasoning]
        if any(isinstance(s, str) for s in signatures):
            extra["signatures"] = signatures
        calls = []
        for p in parts:
            if p.get("type") != "tool_call":
                continue
            cid, name = p.get("id"), p.get("name")
            call: dict[str, Any] = {
                "tool_call_id": cid if isinstance(cid, str) else "",
                "function_name": name if isinstance(name, str) else "",
                "arguments": fold.tool_input(p.get("arguments")),
            }
            if not isinstance(p.get("arguments"), dict) and p.get("arguments") is not None:
                call["extra"] = {"jsonltape": {"arguments": p.get("arguments")}}
            calls.append(call)
        if calls:
            step["tool_calls"] = calls
        step["llm_call_count"] = 1
        usage = tokens(entry.get("usage"), self.source)
        if usage is not None or entry.get("usage") is not None:
            metrics: dict[str, Any] = {}
            if usage is not None:
                for key, value in (
                    ("prompt_tokens", usage.prompt),
                    ("completion_tokens", usage.completion),
                    ("cached_tokens", usage.cached),
                    ("cost_usd", usage.cost),
                ):
                    if value is not None:
                        metrics[key] = value
            metrics["extra"] = {"usage": entry.get("usage")}
            step["metrics"] = metrics
        if "session" in entry:
            step["is_copied_context"] = True
        out = self.add(step, entry.get("time"), extra)
        for call in calls:
            cid = call["tool_call_id"]
            self.calls[cid] = out
            for waiting in self.pending.pop(cid, ()):
                self._attach(out, waiting)

    def _result(
        self, entry: dict[str, Any], parts: list[dict[str, Any]], extra: dict[str, Any]
    ) -> None:
        cid = entry.get("call_id")
        response: Any = None
        is_error = bool(entry.get("error"))
        for p in parts:
            if p.get("type") == "tool_call_response":
                response = p.get("response")
                is_error = is_error or p.get("is_error") is True
                break
        result: dict[str, Any] = {
            "source_call_id": cid if isinstance(cid, str) else None,
            "content": response if isinstance(response, str) else fold.compact_json(response),
        }
        if is_error:
            extra["is_error"] = True
        for key in ("error", "synthetic"):
            if entry.get(key):
                extra[key] = entry[key]
        if isinstance(cid, str) and cid in self.spawned:
            sid = self.spawned[cid]
            result["subagent_trajectory_ref"] = [{"trajectory_id": sid, "session_id": sid}]
            self.referenced.append(sid)
        result["extra"] = {"jsonltape": extra}
        step = self.calls.get(cid) if isinstance(cid, str) else None
        if step is not None:
            self._attach(step, result)
        elif isinstance(cid, str):  # its call may be declared later (a revision moved it)
            self.pending.setdefault(cid, []).append(result | {"_time": entry.get("time")})
        else:  # pragma: no cover - the fold requires a string call id
            self._orphan(result, entry.get("time"))

    @staticmethod
    def _attach(step: dict[str, Any], result: dict[str, Any]) -> None:
        result.pop("_time", None)
        step.setdefault("observation", {"results": []})["results"].append(result)

    def _orphan(self, result: dict[str, Any], time: Any) -> None:
        result.pop("_time", None)
        call = result.pop("source_call_id")
        result["extra"]["jsonltape"]["call_id"] = call
        message = "Result of a tool call no step declares"
        self.add(
            {"source": "system", "message": message, "observation": {"results": [result]}}, time, {}
        )

    def orphans(self) -> None:
        for results in self.pending.values():
            for r in results:
                self._orphan(r, r.get("_time"))
        self.pending.clear()

    def final_metrics(self) -> dict[str, Any]:
        totals: dict[str, Any] = {}
        for key, total in (
            ("prompt_tokens", "total_prompt_tokens"),
            ("completion_tokens", "total_completion_tokens"),
            ("cached_tokens", "total_cached_tokens"),
            ("cost_usd", "total_cost_usd"),
        ):
            values = [s["metrics"][key] for s in self.steps if key in s.get("metrics", {})]
            if values:
                totals[total] = sum(values)
        totals["total_steps"] = len(self.steps) or 1
        return totals
