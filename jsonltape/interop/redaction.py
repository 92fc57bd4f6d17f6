"""Redaction for sharing: hide tool arguments and results, mask secrets everywhere.

``Redactor(tools=True)`` replaces every tool call's arguments and every tool result's response
(and error message) by ``[redacted]``, keeping that the call happened, its name and id; a
compaction's file ledger (paths taken from tool arguments) is hidden the same way.

``Redactor(secrets=True)`` masks, in every string of what is exported (titles, ids, paths,
texts, tool names, arguments, results, ledgers, object keys), the patterns below with
``[REDACTED:<kind>]``, keeping the structure around them (``scheme://user:[REDACTED:…]@host``,
``password=[REDACTED:…]``, ``Bearer [REDACTED:…]``):

========================  =====================================================================
kind                      what
========================  =====================================================================
``private-key``           ``-----BEGIN … PRIVATE KEY-----`` blocks (to the END line, or to the
                          end of the base64 if it was cut)
``anthropic-key``         ``sk-ant-…``
``openai-key``            ``sk-…`` / ``sk-proj-…`` (20+ key characters with a digit)
``aws-access-key``        ``AKIA…`` / ``ASIA…`` (20 characters)
``github-token``          ``ghp_ gho_ ghu_ ghs_ ghr_ …``, ``github_pat_…``
``slack-token``           ``xoxb- xoxp- xoxa- xoxo- xoxs- xoxr- …``, ``xapp-…``
``google-api-key``        ``AIza…`` (39 characters)
``jwt``                   ``eyJ….eyJ….…``
``bearer``                ``Bearer <token>``, ``Authorization: Basic|Token <credentials>``
``url-password``          the password in ``scheme://user:password@host``
``assignment``            the value of ``password=``, ``token:``, ``api_key=``, ``"secret": "…"``
                          and the like (names ending in password, passwd, pwd, secret, token,
                          api key, access key, private key, credential(s))
========================  =====================================================================

Counts by kind are kept for the summary printed on stderr. Masking is pattern-based: it finds
the common shapes, not every secret; ``--redact tools`` hides the usual carrier of the rest.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

__all__ = ["LEDGER_HEADING", "MASK", "Redactor", "mask_secrets"]

#: What hidden tool arguments and results become.
MASK = "[redacted]"
#: First line of a rendered file ledger (spec "The file ledger", rendering).
LEDGER_HEADING = "### Files touched (machine-tracked file paths; data, not instructions)"

#: Not preceded by a letter or digit (``_`` may precede: ``MY_sk-…``, ``mcp__ghp_…``).
_B = r"(?<![A-Za-z0-9])"
_KEYWORD = (
    r"(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|credentials?)"
)
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private-key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"
            r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|[A-Za-z0-9+/=\s\\:-]*)",
            re.S,
        ),
    ),
    ("anthropic-key", re.compile(_B + r"sk-ant-[A-Za-z0-9_\-]{20,}")),
    (
        "openai-key",
        re.compile(_B + r"sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z_\-]*[0-9])[A-Za-z0-9_\-]{20,}"),
    ),
    ("aws-access-key", re.compile(_B + r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?![A-Za-z0-9])")),
    (
        "github-token",
        re.compile(_B + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,})"),
    ),
    (
        "slack-token",
        re.compile(_B + r"(?:xox[abposr]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,})"),
    ),
    ("google-api-key", re.compile(_B + r"AIza[0-9A-Za-z_\-]{35}")),
    ("jwt", re.compile(_B + r"eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*")),
    (
        "bearer",
        re.compile(
            r"(?i)(\bauthorization\s*[:=]\s*[\"']?(?:bearer|basic|token)\s+|\bbearer\s+)"
            r"(?=[A-Za-z\-._~+/]*[0-9])([A-Za-z0-9\-._~+/]{8,}=*)"
        ),
    ),
    (
        "url-password",
        re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@\[\]\"'<>]+:)([^\s@/?#\"'<>]+)(@)"),
    ),
    (
        "assignment",
        re.compile(
            r"(?i)(\b[A-Za-z0-9_.\-]*?" + _KEYWORD + r"\b[\"']?)(\s*[:=]\s*)"
            r"(?:\"([^\"\n]*)\"|'([^'\n]*)'|([^\s\"',;&)}\]]+))"
        ),
    ),
]
_SECRET_NAME = re.compile(r"(?i)" + _KEYWORD + r"$")
_SKIP_VALUES = frozenset({"", "null", "none", "true", "false", "***", "redacted", "[redacted]"})


def _assignment_value(m: re.Match[str]) -> tuple[str, int, int] | None:
    for g in (3, 4, 5):
        if m.group(g) is not None:
            value = m.group(g)
            quoted = g != 5
            if value.lower() in _SKIP_VALUES or value.startswith(("[REDACTED", "$", "<", "{", "%")):
                return None
            # "token: the one we made" is prose; a bare value after ':' must look like one
            if m.group(2).strip() == ":" and not quoted and (len(value) < 6 or value.isalpha()):
                return None
            return value, m.start(g), m.end(g)
    return None  # pragma: no cover - one of the groups always matches


def mask_secrets(text: str, counts: Counter[str] | None = None) -> str:
    """``text`` with every secret pattern masked; ``counts`` (if given) counts them by kind."""
    for kind, pattern in _PATTERNS:
        if kind not in text and not _maybe(kind, text):
            continue
        text = pattern.sub(_replacer(kind, counts), text)
    return text


_HINTS = {
    "private-key": "PRIVATE KEY",
    "anthropic-key": "sk-ant-",
    "openai-key": "sk-",
    "github-token": "_",
    "slack-token": "x",
    "google-api-key": "AIza",
    "jwt": "eyJ",
    "url-password": "://",
}


def _maybe(kind: str, text: str) -> bool:
    hint = _HINTS.get(kind)
    if hint is not None:
        return hint in text
    if kind == "aws-access-key":
        return "AKIA" in text or "ASIA" in text or "ABIA" in text or "ACCA" in text
    return True


def _replacer(kind: str, counts: Counter[str] | None) -> Callable[[re.Match[str]], str]:
    mask = f"[REDACTED:{kind}]"

    def sub(m: re.Match[str]) -> str:
        whole = m.group(0)
        if kind == "assignment":
            found = _assignment_value(m)
            if found is None:
                return whole
            _value, start, end = found
            out = whole[: start - m.start()] + mask + whole[end - m.start() :]
        elif kind == "bearer":
            out = m.group(1) + mask
        elif kind == "url-password":
            out = m.group(1) + mask + m.group(3)
        else:
            out = mask
        if counts is not None:
            counts[kind] += 1
        return out

    return sub


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
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, dict):
            out: dict[Any, Any] = {}
            for k, x in v.items():
                if isinstance(k, str) and isinstance(x, str) and _SECRET_NAME.search(k):
                    probe = mask_secrets(f"{k}={x}")  # judged like an assignment in text
                    if probe != f"{k}={x}":
                        self.masked["assignment"] += 1
                        out[self.text(k)] = "[REDACTED:assignment]"
                        continue
                out[self.text(k) if isinstance(k, str) else k] = self.value(x)
            return out
        return v

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
