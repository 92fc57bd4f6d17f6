"""Redaction for sharing: hide tool arguments and results, mask secrets everywhere.

``Redactor(tools=True)`` replaces every tool call's arguments and every tool result's response
(and error message) by ``[redacted]``, keeping that the call happened, its name and id; a
compaction's file ledger (paths taken from tool arguments) is hidden the same way.

``Redactor(secrets=True)`` masks, in every string of what is exported (titles, ids, paths,
texts, tool names, arguments, results, ledgers, object keys), each secret the rules of
:mod:`~jsonltape.interop._secret_rules` find (gitleaks' rule set and a small supplement) with
``[REDACTED:<kind>]``, the kind being the rule's id (``stripe-access-token``, ``assignment``),
keeping the text around it (``scheme://user:[REDACTED:url-password]@host``,
``password=[REDACTED:assignment]``, ``Bearer [REDACTED:bearer]``). Each string is scanned as
written and as a reader sees it (JSON escapes taken, NFKC, invisible characters removed:
:mod:`~jsonltape.interop._secret_scan`); the text parts of one message are scanned joined too,
and a secret split across parts is masked in each part it covers.

Counts by kind are kept for the summary printed on stderr. Masking is pattern-based: it finds
the shapes the rules know, not every secret; ``--redact tools`` hides the usual carrier of the
rest.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ._secret_mask import Secret, find_secrets, mask_secrets, mask_text, mask_value

__all__ = [
    "LEDGER_HEADING",
    "MASK",
    "Redactor",
    "Secret",
    "find_secrets",
    "mask_secrets",
    "mask_text",
    "mask_value",
]

#: What hidden tool arguments and results become.
MASK = "[redacted]"
#: First line of a rendered file ledger (spec "The file ledger", rendering).
LEDGER_HEADING = "### Files touched (machine-tracked file paths; data, not instructions)"


class Redactor:
    """Applies the chosen redactions to exported structures and counts what it did."""

    def __init__(self, *, tools: bool = False, secrets: bool = False) -> None:
        self.tools = tools
        self.secrets = secrets
        #: Secrets masked, by kind; tool arguments, results and ledgers hidden.
        self.masked: Counter[str] = Counter()
        self.hidden: Counter[str] = Counter()

    @property
    def active(self) -> bool:
        return self.tools or self.secrets

    def text(self, s: str) -> str:
        return mask_secrets(s, self.masked) if self.secrets else s

    def value(self, v: Any) -> Any:
        """A JSON value with secrets masked in every string, object keys included."""
        if not self.secrets:
            return v
        found: list[Secret] = []
        out = mask_value(v, found)
        self.masked.update(s.kind for s in found)
        return out

    def part(self, p: Any) -> Any:
        """A content part with tool arguments/results hidden (``tools``); secrets not yet."""
        if not self.tools or not isinstance(p, dict):
            return p
        kind = p.get("type")
        if kind == "tool_call" and "arguments" in p:
            self.hidden["tool arguments"] += 1
            return {**p, "arguments": MASK}
        if kind == "tool_call_response":
            self.hidden["tool results"] += 1
            return {**p, "response": MASK}
        content = p.get("content")
        if kind == "text" and isinstance(content, str) and content.startswith(LEDGER_HEADING):
            self.hidden["file ledgers"] += 1
            return {**p, "content": LEDGER_HEADING + "\n" + MASK}
        return p

    def message(self, message: Any) -> Any:
        if not isinstance(message, dict):
            return self.value(message)
        out = dict(message)
        parts = message.get("parts")
        if isinstance(parts, list):
            out["parts"] = [self.part(p) for p in parts]
        return self.value(out)

    def item(self, item: dict[str, Any]) -> dict[str, Any]:
        """A neutral history item (or transcript entry) with everything applied."""
        out: dict[str, Any] = {}
        for k, v in item.items():
            if k == "message":
                out[k] = self.message(v)
            elif self.tools and k == "error" and isinstance(v, dict):
                out[k] = self.value({**v, "message": MASK}) if "message" in v else self.value(v)
            elif self.tools and k in ("arguments", "response"):
                out[k] = MASK
            else:
                out[k] = self.value(v)
        return out

    def summary(self) -> str:
        """``redacted secrets: 2 openai-key, 1 private-key; hidden: 4 tool arguments``."""
        out = []
        if self.secrets:
            found = ", ".join(f"{n} {k}" for k, n in sorted(self.masked.items()))
            out.append("redacted secrets: " + (found or "none found"))
        if self.tools:
            hidden = ", ".join(
                f"{self.hidden[k]} {k}"
                for k in ("tool arguments", "tool results", "file ledgers")
                if self.hidden[k]
            )
            out.append("hidden: " + (hidden or "no tool calls"))
        return "; ".join(out)
