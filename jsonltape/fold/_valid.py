"""Validity oracle: the providers' documented rules for a request body's messages.

Each function returns the problems of one body, one sentence each, empty when the body is
valid. They check what the fold's mappings (spec 8.7.11, 8.7.12) promise, so a body that fails
here is one the provider would refuse with a 400.

Anthropic Messages (https://docs.anthropic.com/en/api/messages, "Tool use"
https://platform.claude.com/docs/en/agents-and-tools/tool-use/overview, "Building with extended
thinking" https://docs.anthropic.com/claude/docs/build-with-claude/extended-thinking):

* ``messages`` alternate ``user`` and ``assistant`` (the mapping merges consecutive turns of
  one role, so two in a row means the merge was skipped);
* every ``tool_use`` block is answered by a ``tool_result`` block with its id in the very next
  message, a user message, where the tool results come first ("Each `tool_use` block must have
  a corresponding `tool_result` block in the next message"); a ``tool_result`` answers a
  ``tool_use`` of the message right before it ("Each `tool_result` block must have a
  corresponding `tool_use` block in the previous message");
* no message has empty content, and no ``text`` block has empty text;
* ``thinking`` blocks are sent back only in assistant messages and unmodified, with their
  ``signature`` (the signature is what the API verifies); the mapping keeps their order. A
  signature Anthropic issued is base64 text (an encrypted payload): one that is not (a field
  name such as ``reasoning_content``, another API's JSON replay data) is a forgery the API
  refuses. (A base64 signature another provider issued is refused too; only its provenance,
  which the importer records, tells it apart.)

OpenAI Chat Completions (https://platform.openai.com/docs/api-reference/chat/create, "Function
calling" https://platform.openai.com/docs/guides/function-calling):

* an assistant message with ``tool_calls`` "must be followed by tool messages responding to
  each 'tool_call_id'": every id is answered by a ``tool`` message before the next message of
  another role;
* a ``tool`` message must be "a response to a preceding message with 'tool_calls'": none is
  orphaned, and none answers the same call twice.

Both APIs refuse a request member they do not define ("Unrecognized request argument", "Extra
inputs are not permitted"): a body's top-level members are checked against the members the
providers' SDK types declare (``_request_keys``, generated from them).

:func:`check_kept` compares a body with the history it came from: a body can be valid and
still have lost an exchange (a call id a later turn used again, paired with the earlier turn).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ._request_keys import ANTHROPIC_KEYS, OPENAI_KEYS

__all__ = ["check_anthropic", "check_kept", "check_openai"]

#: Standard base64 with its padding: what an Anthropic signature (an encrypted payload) is.
_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def _members(body: Any, defined: frozenset[str], api: str) -> list[str]:
    """The body's top-level members the API does not define."""
    if not isinstance(body, dict):
        return ["the body is not an object"]
    return [
        f"{k}: not a member of a {api} request (the API refuses the request)"
        for k in body
        if k not in defined
    ]


def check_openai(body: Any) -> list[str]:
    """Problems of an OpenAI Chat Completions request body (empty if valid)."""
    problems = _members(body, OPENAI_KEYS, "Chat Completions")
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return [*problems, "messages is not a list"]
    waiting: dict[str, int] = {}  # call id -> index of the assistant message declaring it
    open_calls: set[str] = set()  # ids of the assistant message whose tool run is open
    answered: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role == "tool":
            call = m.get("tool_call_id")
            if call not in open_calls:
                problems.append(
                    f"messages.{i}: tool message answers no preceding tool call {call!r}"
                )
            elif call in answered:
                problems.append(f"messages.{i}: tool call {call!r} answered twice")
            else:
                answered.add(call)
                waiting.pop(call, None)
            continue
        for call, at in waiting.items():
            problems.append(f"messages.{at}: tool call {call!r} has no tool message after it")
        waiting, open_calls, answered = {}, set(), set()
        if not isinstance(m, dict):
            problems.append(f"messages.{i}: not an object")
            continue
        if role == "assistant":
            calls = m.get("tool_calls")
            if calls is not None and not (isinstance(calls, list) and calls):
                problems.append(f"messages.{i}: tool_calls is not a non-empty list")
            if m.get("content") is None and not calls:
                problems.append(f"messages.{i}: assistant message with neither content nor calls")
            for c in calls if isinstance(calls, list) else ():
                call = c.get("id") if isinstance(c, dict) else None
                if not isinstance(call, str) or call in waiting:
                    problems.append(f"messages.{i}: tool call id {call!r} missing or repeated")
                else:
                    waiting[call] = i
                    open_calls.add(call)
    for call, at in waiting.items():
        problems.append(f"messages.{at}: tool call {call!r} has no tool message after it")
    return problems


def check_anthropic(body: Any) -> list[str]:
    """Problems of an Anthropic Messages request body (empty if valid)."""
    problems = _members(body, ANTHROPIC_KEYS, "Messages")
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return [*problems, "messages is not a list"]
    previous_role: Any = None
    uses: list[Any] = []  # tool_use ids of the previous (assistant) message
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        content = m.get("content") if isinstance(m, dict) else None
        if role not in ("user", "assistant"):
            problems.append(f"messages.{i}: role {role!r} is not user or assistant")
        if role == previous_role:
            problems.append(f"messages.{i}: two {role} messages in a row")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list) or not content:
            problems.append(f"messages.{i}: empty content")
            content = []
        blocks = [b for b in content if isinstance(b, dict)]
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if role == "user":
            leading = 0
            while leading < len(blocks) and blocks[leading].get("type") == "tool_result":
                leading += 1
            if leading != len(results):
                problems.append(f"messages.{i}: tool_result blocks are not first")
        for call in uses:
            if call not in results:
                problems.append(f"messages.{i - 1}: tool_use {call!r} has no tool_result after it")
        seen: set[Any] = set()
        for call in results:
            if call not in uses:
                problems.append(f"messages.{i}: tool_result {call!r} answers no tool_use before it")
            elif call in seen:
                problems.append(f"messages.{i}: tool_use {call!r} answered twice")
            seen.add(call)
        uses = []
        for b in blocks:
            kind = b.get("type")
            if kind == "text" and not b.get("text"):
                problems.append(f"messages.{i}: empty text block")
            elif kind in ("thinking", "redacted_thinking"):
                sig = b.get("signature") if kind == "thinking" else b.get("data")
                if role != "assistant":
                    problems.append(f"messages.{i}: {kind} block outside an assistant message")
                if not isinstance(sig, str) or not sig:
                    problems.append(f"messages.{i}: {kind} block without its signature")
                elif _BASE64.fullmatch(sig) is None:
                    problems.append(
                        f"messages.{i}: {kind} block signed with {sig[:40]!r}, which is not a "
                        "signature Anthropic issued (not base64)"
                    )
            elif kind == "tool_use":
                if role != "assistant":
                    problems.append(f"messages.{i}: tool_use block outside an assistant message")
                elif b.get("id") in uses:
                    problems.append(f"messages.{i}: tool_use id {b.get('id')!r} repeated")
                else:
                    uses.append(b.get("id"))
        previous_role = role
    for call in uses:
        problems.append(
            f"messages.{len(messages) - 1}: tool_use {call!r} has no tool_result after it"
        )
    return problems


def check_kept(items: Iterable[dict[str, Any]], body: Any) -> list[str]:
    """Problems of a body (either provider's) that lost an exchange its neutral history
    ``items`` completes: every tool call of an assistant message that a result in the run of
    ``tool/result`` items right after it answers stays in both bodies (spec 8.7.11, 8.7.12).
    A body that drops one (a call id used again in a later turn, its result paired with the
    earlier turn) is valid for the provider and silently loses what the model did."""
    history = list(items)
    need: Counter[str] = Counter()
    for i, item in enumerate(history):
        if item["type"] != "assistant/message":
            continue
        run: set[str] = set()
        for later in history[i + 1 :]:
            if later["type"] != "tool/result":
                break
            run.add(later["call_id"])
        parts = item["message"]["parts"]
        calls = {p["id"] for p in parts if isinstance(p, dict) and p.get("type") == "tool_call"}
        need.update(calls & run)
    got: Counter[Any] = Counter()
    messages = body.get("messages") if isinstance(body, dict) else None
    for m in messages if isinstance(messages, list) else ():
        if not isinstance(m, dict):
            continue
        tool_calls = m.get("tool_calls")
        for c in tool_calls if isinstance(tool_calls, list) else ():
            got[c.get("id") if isinstance(c, dict) else None] += 1
        content = m.get("content")
        for b in content if isinstance(content, list) else ():
            if isinstance(b, dict) and b.get("type") == "tool_use":
                got[b.get("id")] += 1
    return [
        f"tool call {call!r}: the history answers it {n} time(s), the body keeps it {got[call]}"
        for call, n in sorted(need.items())
        if got[call] < n
    ]
