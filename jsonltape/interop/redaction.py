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
``url-password``          the password in ``scheme://user:password@host`` (RFC 3986 userinfo; the
                          user may be empty, ``redis://:pw@host``; the password runs to the last
                          ``@`` a host follows, so ``/``, ``@`` and ``:`` in it do not leak)
``assignment``            the value of ``NAME=value``, ``NAME: value``, ``"NAME": "value"``,
                          ``export NAME='value'`` (shell, .env, YAML, JSON; quoted or not) for
                          names ending in password, passwd, passphrase, pwd, secret, token, api
                          key, access key, private key, credential(s) (``POSTGRES_PASSWORD``,
                          ``db_password``, ``PGPASSWORD``), and ``NAME_KEY`` / ``NAME_PASS`` in
                          upper case (``STRIPE_KEY``; not ``primary_key`` or ``first_pass``)
========================  =====================================================================

Not masked, to keep transcripts readable: a type (``password: str``, ``token: Optional[str]``),
code (``password = getpass()``), a variable or template (``password: $DB_PASSWORD``,
``token: {{ vault_token }}``), and after a bare keyword and ``:`` an unquoted value that reads
as prose (``token: we need it``: shorter than 6 characters, or letters only with more text
after it on the line). After a compound name any value is masked, letters only too
(``POSTGRES_PASSWORD: correcthorse``).

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
    r"(?:password|passwd|passphrase|pwd|pass|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|credentials?|key)"
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
        # RFC 3986 userinfo: user (maybe empty) ":" password "@" host. People leave "/", "@"
        # and ":" unencoded in passwords, so the password runs to the LAST "@" of the address
        # that a host follows; masking too much of a rare path with "@" beats leaking a tail.
        # The scheme starts at a word start, so a long run of letters is scanned once.
        "url-password",
        re.compile(
            r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@\[\]\"'<>`]*:)"
            r"([^\s\"'<>`]{1,256})(@)(?=(?:[A-Za-z0-9\-._~%]+|\[[0-9A-Fa-f:.]+\])(?::\d*)?"
            r"(?:[/?#\s\"'<>`),;\]]|$))"
        ),
    ),
    (
        # name=value, name: value, "name": "value", export NAME=value, NAME='value' ... for a
        # name ending in a keyword (see _strength). The match starts at the keyword (the
        # lookahead lets the engine skip most positions at once); the rest of the name is
        # read backwards from there, so no run of text is scanned more than once.
        "assignment",
        re.compile(
            r"(?i)(?=[pstakc])(" + _KEYWORD + r")(?![A-Za-z0-9_])"
            r"([\"']?)([ \t]*[:=][ \t]*)"
            r"(?:\"((?:[^\"\\\n]|\\.)*)\"|'([^'\n]*)'|(?!\\)([^\s\"',;&)}\]]+))"
        ),
    ),
]
_SECRET_NAME = re.compile(r"(?i)" + _KEYWORD + r"$")
_SKIP_VALUES = frozenset({"", "null", "none", "true", "false", "***", "redacted", "[redacted]"})
#: A value that is a type, not a secret: ``password: str``, ``token: Optional[str]``.
_TYPE_WORDS = frozenset(
    {
        "str",
        "string",
        "bytes",
        "int",
        "integer",
        "bool",
        "boolean",
        "float",
        "number",
        "any",
        "object",
        "optional",
        "secretstr",
        "secretbytes",
        "text",
        "varchar",
        "char",
        "list",
        "dict",
        "required",
    }
)
#: Words that end names of things that are not secrets (primary_key, first_pass).
_WEAK_ENDINGS = ("key", "pass")
_STRONG_KEYS = (
    *("api_key", "api-key", "apikey", "access_key", "access-key", "accesskey"),
    *("private_key", "private-key", "secret_key", "secret-key", "secretkey"),
)
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
#: A bare keyword as a name: in prose ("token: the one we made") as often as in config.
_PLAIN_NAMES = frozenset(
    ["password", "passwd", "passphrase", "pwd", "secret", "token", "credential", "credentials"]
)
_ENV_NAME = re.compile(r"[A-Z0-9_]*_(?:KEY|PASS)")
_LEADING_WORD = re.compile(r"[A-Za-z_]+")
_CODE = re.compile(r"[A-Za-z_][\w.]*[(\[]")
_MASKED = ("[REDACTED", "\\[REDACTED")  # already masked (the second: escaped by Markdown)


def _strength(name: str) -> str | None:
    """``"strong"`` for a name only a secret has (``POSTGRES_PASSWORD``, ``db_password``,
    ``api_key``), ``"plain"`` for a bare keyword (``password``, ``token``), None otherwise
    (``primary_key``, ``bypass``: "key" and "pass" count only in ``NAME_KEY``/``NAME_PASS``)."""
    low = name.lower().lstrip("-.")
    if low.endswith(_WEAK_ENDINGS) and not low.endswith(_STRONG_KEYS):
        return "strong" if _ENV_NAME.fullmatch(name) else None
    return "plain" if low in _PLAIN_NAMES else "strong"


def _name(text: str, end: int) -> str:
    """The part of a name before its keyword: the run of name characters ending at ``end``."""
    start = end
    while start > 0 and text[start - 1] in _NAME_CHARS:
        start -= 1
    return text[start:end]


def _line_ends(text: str, at: int) -> bool:
    end = text.find("\n", at)
    return not text[at : end if end >= 0 else len(text)].strip()


def _assignment_value(m: re.Match[str]) -> tuple[int, int] | None:
    """Where the secret value of an assignment match is, or None when it is none."""
    strength = _strength(_name(m.string, m.start(1)) + m.group(1))
    if strength is None:
        return None
    g = next(g for g in (4, 5, 6) if m.group(g) is not None)
    value = m.group(g)
    if value.lower() in _SKIP_VALUES or value.startswith(("$", "<", "{", "%", *_MASKED)):
        return None  # empty, a placeholder, a variable or template, or masked already
    if g == 6 and m.group(3).strip() == ":":  # unquoted after ":": YAML, or prose, or a type
        word = _LEADING_WORD.match(value)
        if word is not None and word.group(0).lower() in _TYPE_WORDS:
            return None
        # "token: the one we made" is prose; after a bare keyword a value must look like a
        # secret (a digit or symbol, 6+ characters) or be all that is left of the line.
        if strength == "plain" and (
            len(value) < 6 or (value.isalpha() and not _line_ends(m.string, m.end(g)))
        ):
            return None
    if g == 6 and _CODE.match(value):
        return None  # password = getpass(...), token = os.environ[...]: code, not a value
    return m.start(g), m.end(g)


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
            start, end = found
            out = whole[: start - m.start()] + mask + whole[end - m.start() :]
        elif kind == "bearer":
            out = m.group(1) + mask
        elif kind == "url-password":
            if m.group(2).startswith(_MASKED):
                return whole
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
