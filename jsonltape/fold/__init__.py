"""Folds: everything derived from the event log (surface, messages, compaction, forks, ...).

Reading::

    jsonltape.messages("s.jsonl")                        # the model-visible history, neutral
    jsonltape.messages("s.jsonl", format="openai")       # a Chat Completions request body
    jsonltape.messages("s.jsonl", at=120)                # what the model saw at seq 120
    jsonltape.messages("s.jsonl", all_versions=True)     # every version, with its status

Writing (each appends one batch; nothing is ever deleted)::

    jsonltape.compact("s.jsonl", "summary ...", through=40)
    jsonltape.prune("s.jsonl", 17)
    jsonltape.retract("s.jsonl", 12); jsonltape.restore("s.jsonl", 12)
    info = jsonltape.fork("s.jsonl", at=40); jsonltape.merge("s.jsonl", info.path)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._surface import COMPACTION_SOURCES, Status, SurfaceFold, tool_call_ids
from ._convert import (
    Format,
    MessageChange,
    answer_scopes,
    anthropic_request,
    compact_json,
    js_number,
    message_changes,
    message_text,
    neutral_item,
    openai_request,
    tool_input,
)
from ._fold import FoldError, Node, SessionFold, Version, fold_file, walk
from ._fork import ForkInfo, MergeResult, discard, fork, merge
from ._ledger import (
    DEFAULT_READ_TOOLS,
    DEFAULT_WRITE_TOOLS,
    FileLedger,
    LedgerConfig,
    build_ledger,
    extract_ops,
    merge_ledgers,
    render_ledger,
    sanitize_path,
)
from ._ops import Compaction, Target, compact, handoff, prune, restore, retract, revise
from ._output import message_body

__all__ = [
    "COMPACTION_SOURCES",
    "DEFAULT_READ_TOOLS",
    "DEFAULT_WRITE_TOOLS",
    "Compaction",
    "FileLedger",
    "FoldError",
    "ForkInfo",
    "Format",
    "LedgerConfig",
    "MergeResult",
    "MessageChange",
    "Node",
    "SessionFold",
    "Status",
    "SurfaceFold",
    "Target",
    "Version",
    "answer_scopes",
    "anthropic_request",
    "build_ledger",
    "compact",
    "compact_json",
    "discard",
    "extract_ops",
    "fold_file",
    "fork",
    "handoff",
    "js_number",
    "merge",
    "merge_ledgers",
    "message_changes",
    "message_text",
    "messages",
    "neutral_item",
    "openai_request",
    "prune",
    "render_ledger",
    "request_header",
    "restore",
    "retract",
    "revise",
    "sanitize_path",
    "title",
    "todo",
    "tool_call_ids",
    "tool_input",
    "walk",
]


def messages(
    path: str | os.PathLike[str],
    at: int | None = None,
    format: Format = "neutral",
    all_versions: bool = False,
    *,
    parents: Mapping[str, str | os.PathLike[str]] | None = None,
    branch: int | None = None,
    branches: bool = False,
) -> dict[str, Any]:
    """The model-visible history of a session as of seq ``at`` (default: the end).

    ``format="neutral"`` gives ``{session, seq, header?, messages}`` where each message item
    carries its seq and the message as logged; ``"openai"`` and ``"anthropic"`` give request
    bodies with the latest ``request/header`` (model, system prompt, tools, params) folded in.
    ``all_versions`` lists every message event with its status instead (neutral only).
    ``parents`` maps session ids to paths for the ancestors of a fork. ``branch`` folds the
    version a merge recorded at that ``branch/start`` seq instead; ``branches`` (with
    ``all_versions``) lists the message events recorded by branch events too, with status
    ``branch`` (spec §8.7.14).
    """
    body = message_body(
        path, at, format, all_versions, parents=parents, branch=branch, branches=branches
    )
    body["messages"] = list(body["messages"])
    return body


def request_header(
    path: str | os.PathLike[str],
    at: int | None = None,
    *,
    parents: Mapping[str, str | os.PathLike[str]] | None = None,
) -> dict[str, Any] | None:
    """The data of the latest ``request/header`` (a fork inherits its parent's)."""
    return fold_file(path, at, parents=parents).request_header()


def title(path: str | os.PathLike[str]) -> str | None:
    """The session's title for people: the latest ``session/title`` (a rename or summary
    recorded after the header was written, spec §8.4), else the header's."""
    from .. import reader

    found: str | None = None
    for line in reader.lines(path):
        e = line.event
        if e.seq == 0:
            found = e.data.get("title") if isinstance(e.data.get("title"), str) else None
        elif e.type == "session/title" and isinstance(e.data.get("title"), str):
            found = e.data["title"]
    return found


def todo(
    path: str | os.PathLike[str],
    at: int | None = None,
    *,
    parents: Mapping[str, str | os.PathLike[str]] | None = None,
) -> list[dict[str, Any]] | None:
    """The todo list of the latest ``todo/write`` (None if there was none)."""
    return fold_file(path, at, parents=parents).todo_list()
