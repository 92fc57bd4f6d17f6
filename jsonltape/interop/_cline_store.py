"""Cline, Roo Code and Kilo Code sessions as :class:`~._source.Unit` s of JSONL records.

Two stores (cline/cline ``apps/vscode/src/core/storage/disk.ts`` at v3.89.2 = commit
e1bdeeff68e95734901c7a4b3a31753bae54a634; RooCodeInc/Roo-Code
``src/core/task-persistence/`` at commit cb836567180a3ff1da6d082f3178b90c3bd22a70;
Kilo-Org/kilocode-legacy at commit 56b73d3bdad40673dfe05171273b20c51354db60; cline/cline
``sdk/packages/core/docs/messages-contract-v1.md`` at commit
21cb8d2525bcedf1f4b6890b27a74a14fe7451e4):

* **A task folder** ``tasks/<id>/`` (Cline up to 3.89, Roo Code, Kilo Code before its
  OpenCode-based rebuild): ``api_conversation_history.json``, the history the model is sent
  (Anthropic messages with ``ts``, and on assistant messages the provider's response ``id``,
  Cline's ``modelInfo`` and ``metrics``), and ``ui_messages.json``, what the user saw. Both are
  JSON arrays the extension rewrites whole. It renders as ``{"type": "task", id, parentTaskId?,
  rootTaskId?}`` (Roo's ``history_item.json`` links sub-tasks), then every element of the API
  history as ``{"type": "api", "message": ...}`` (without the ``condenseParent`` and
  ``truncationParent`` tags Roo Code adds to earlier messages in place when it condenses) and
  every ``api_req_started`` element of the UI
  messages (one per request, whose ``text`` is the request's usage as JSON) as ``{"type": "ui",
  "message": ...}``, in the order they happened (``ts``; an API message before a UI one of the
  same millisecond). The other UI messages (what the user was shown, and rewritten in place:
  partial messages, commands' completion, checkpoint states) are not rendered. Records from the
  last request's ``api_req_started`` on (its usage and reply may still change) are held back
  until the source is settled.
* **An SDK session** ``sessions/<id>/<id>.messages.json`` (Cline 4, Cline CLI 2): ``{version,
  agent, sessionId, messages: [{id, role, content, ts?, modelInfo?, metrics?, metadata?}],
  system_prompt?}`` written whole, in place, on every change, beside its manifest ``<id>.json``.
  It renders as ``{"type": "session", id, agent, started_at?, cwd?, provider?, model?,
  forked_from?, parent?}`` (the manifest's and the file's fields that never change), then each
  message as ``{"type": "message", "message": ...}``. Records from the last prompt on (Cline adds
  the turn's ``metrics`` to its last reply when the turn ends) are held back until the source is
  settled. The system prompt, rewritten with the file, is not rendered. A sub-agent's file
  (``<agent id>.messages.json`` in its root session's folder) is a session of its own.

A document that is not complete JSON (a whole-file rewrite caught half-way, or damaged) is one
verdict naming the file, and nothing of the session is imported (until it is complete).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

from ..errors import FormatError
from ._parts import member
from ._source import Unit, rendering, too_deep

__all__ = ["API", "UI", "units"]

API = "api_conversation_history.json"
UI = "ui_messages.json"
_HISTORY_ITEM = "history_item.json"
#: What Roo Code and Kilo Code add to earlier API messages when they condense or truncate the
#: context (the summary or marker they append says what): left out, so the rendering only grows.
_RETAGGED = frozenset({"condenseParent", "truncationParent"})
_SDK = ".messages.json"
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.decode
_NOFOLLOW = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _read(path: Path) -> bytes | None:
    """A file's bytes (never through a symlink), or None when it is missing."""
    try:
        fd = os.open(path, _NOFOLLOW)
    except FileNotFoundError:
        return None
    with open(fd, "rb") as f:
        return f.read()


def _document(path: Path, kind: type) -> Any:
    """A whole-file JSON document of ``kind`` (None when the file is missing), or the verdict
    on one that is not (nested too deep, torn by a rewrite caught half-way, not JSON)."""
    data = _read(path)
    if data is None:
        return None
    deep = too_deep(data)
    if deep is not None:
        raise FormatError(f"{deep}; nothing of this session is imported", path=path)
    try:
        value = _decode(data)
    except msgspec.DecodeError as exc:
        raise FormatError(
            f"not a complete JSON document ({exc}): being written, or damaged; nothing of "
            "this session is imported",
            path=path,
        ) from None
    if not isinstance(value, kind):
        what = "an array" if kind is list else "an object"
        raise FormatError(f"not {what} of messages (a {type(value).__name__})", path=path)
    return value


def _stamp(paths: list[Path]) -> tuple[int, int]:
    size = mtime = 0
    for p in paths:
        try:
            st = os.stat(p, follow_symlinks=False)
        except OSError:
            continue
        size += st.st_size
        mtime = max(mtime, st.st_mtime_ns)
    return size, mtime


# -- task folders ---------------------------------------------------------------------------


def task_unit(folder: Path, title: str | None) -> Unit:
    files = [folder / API, folder / UI, folder / _HISTORY_ITEM]
    size, mtime = _stamp(files)

    def render(settled: bool) -> tuple[bytes, int]:
        return _task_rendering(folder, settled)

    return Unit(str(folder), folder.name, size, mtime, render, title)


def _task_rendering(folder: Path, settled: bool) -> tuple[bytes, int]:
    api = _document(folder / API, list) or []
    ui = _document(folder / UI, list) or []
    item = _document(folder / _HISTORY_ITEM, dict) or {}
    task: dict[str, Any] = {"type": "task", "id": folder.name}
    for key in ("parentTaskId", "rootTaskId"):
        if isinstance(item.get(key), str) and item[key]:
            task[key] = item[key]
    rows: list[tuple[tuple[int, int, int], dict[str, Any]]] = []
    ts = 0
    for i, m in enumerate(api):
        if isinstance(m, dict):
            if _int(m.get("ts")):
                ts = m["ts"]
            m = {k: v for k, v in m.items() if k not in _RETAGGED}
        rows.append(((ts, 0, i), {"type": "api", "message": m}))
    for i, m in enumerate(ui):
        if isinstance(m, dict) and m.get("say") == "api_req_started":
            rows.append(((m["ts"] if _int(m.get("ts")) else 0, 1, i), {"type": "ui", "message": m}))
    rows.sort(key=lambda r: r[0])
    lines = [_encode(task)]
    held: int | None = None
    for _key, rec in rows:
        if rec["type"] == "ui":
            held = len(lines)  # the request still running may update it and its reply
        lines.append(_encode(rec))
    return rendering(lines, None if settled else held)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@lru_cache(maxsize=16)
def _titles(path: Path, stamp: tuple[int, int]) -> dict[str, str]:
    """Cline's ``state/taskHistory.json``: task id -> its ``task`` (the first prompt, which
    Cline shows as the title)."""
    try:
        items = _document(path, list) or []
    except FormatError:
        return {}
    return {
        str(i["id"]): i["task"]
        for i in items
        if isinstance(i, dict) and isinstance(i.get("task"), str) and "id" in i
    }


def task_title(folder: Path) -> str | None:
    """The title the extension shows for a task: Roo's ``history_item.json`` ``task``, else
    Cline's ``state/taskHistory.json`` entry (Kilo keeps it in VS Code's own database: none)."""
    try:
        item = _document(folder / _HISTORY_ITEM, dict)
    except FormatError:
        item = None
    if isinstance(item, dict) and isinstance(item.get("task"), str):
        return str(item["task"])
    index = folder.parent.parent / "state" / "taskHistory.json"
    stamp = _stamp([index])
    return _titles(index, stamp).get(folder.name) if stamp[1] else None


# -- SDK sessions ---------------------------------------------------------------------------


def sdk_unit(path: Path) -> Unit:
    sid = path.name[: -len(_SDK)]
    manifest = path.with_name(f"{path.parent.name}.json")
    size, mtime = _stamp([path])
    title: str | None = None
    try:
        info = _document(manifest, dict) or {}
    except FormatError:
        info = {}
    meta = member(info, "metadata")
    if sid == path.parent.name and isinstance(meta.get("title"), str):
        title = meta["title"]

    def render(settled: bool) -> tuple[bytes, int]:
        return _sdk_rendering(path, sid, info, settled)

    return Unit(str(path), sid, size, mtime, render, title)


def _sdk_rendering(path: Path, sid: str, info: dict[str, Any], settled: bool) -> tuple[bytes, int]:
    doc = _document(path, dict)
    if doc is None or not isinstance(doc.get("messages"), list):
        raise FormatError("not a Cline messages file (no messages list)", path=path)
    session: dict[str, Any] = {"type": "session", "id": sid}
    if isinstance(doc.get("agent"), str):
        session["agent"] = doc["agent"]
    root = path.parent.name
    if sid == root:  # the session's own file: its manifest describes it
        for key in ("started_at", "cwd", "provider", "model"):
            if isinstance(info.get(key), str) and info[key]:
                session[key] = info[key]
        fork = member(member(info, "metadata"), "fork")
        if isinstance(fork.get("forkedFromSessionId"), str):
            session["forked_from"] = fork["forkedFromSessionId"]
    else:  # a sub-agent's or teammate's file in its root session's folder
        session["parent"] = root
    lines = [_encode(session)]
    held: int | None = None
    for m in doc["messages"]:
        if isinstance(m, dict) and _prompt(m):
            held = len(lines)
        lines.append(_encode({"type": "message", "message": m}))
    return rendering(lines, None if settled else held)


def _prompt(m: dict[str, Any]) -> bool:
    content = m.get("content")
    blocks = content if isinstance(content, list) else [content]
    return m.get("role") == "user" and not any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks
    )


# -- what a path holds ----------------------------------------------------------------------


def units(path: Path) -> list[Unit] | None:
    """The session a path stands for: a task folder (or one of its two files), an SDK
    session's messages file; None for anything else (a directory is walked)."""
    if path.is_dir():
        if (path / API).is_file() or (path / UI).is_file():
            return [task_unit(path, task_title(path))]
        return None
    if path.name in (API, UI):
        return [task_unit(path.parent, task_title(path.parent))]
    if path.name.endswith(_SDK):
        return [sdk_unit(path)]
    return None


def wanted(path: Path) -> bool:
    """A task folder's API history (or its UI messages when it has none yet), or an SDK
    session's messages file."""
    name = path.name
    if name == API:
        return True
    if name == UI:
        return not path.with_name(API).exists()
    return name.endswith(_SDK) and len(name) > len(_SDK)
