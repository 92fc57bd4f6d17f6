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
from collections.abc import Collection, Iterator
from typing import Any, NamedTuple

__all__ = [
    "ANY",
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
    if counts is None:
        return mask_text(text)
    found: list[Secret] = []
    text = mask_text(text, found)
    counts.update(s.kind for s in found)
    return text


class Secret(NamedTuple):
    """One masked match of a redaction pattern: its kind and the text it matched (never
    printed; :func:`jsonltape.interop._redact_copy.fingerprint` names it)."""

    kind: str
    matched: str


def find_secrets(text: str, kinds: Collection[str] | None = None) -> Iterator[Secret]:
    """Every secret :func:`mask_secrets` masks in ``text``, in the order it masks them: each
    pattern in turn over the text the earlier ones left (a ``password=sk-ant-…`` is one
    ``anthropic-key``, not also an ``assignment``). ``kinds`` limits the patterns (``"*"``:
    all); one that cannot match changes nothing."""
    found: list[Secret] = []
    mask_text(text, found, kinds)
    return iter(found)


def mask_text(
    text: str, found: list[Secret] | None = None, kinds: Collection[str] | None = None
) -> str:
    """The one rule: ``text`` with every match of the patterns masked, as ``re.sub`` of each
    pattern in turn would mask it; every masked match is appended to ``found``. ``kinds``
    limits the patterns to those (``"*"``: all)."""
    rules = _RULES if kinds is None else _rules_for(frozenset(kinds))
    folded: list[str | None] = [None]  # text.lower() for the case-insensitive rules, once
    for rule in rules:
        starts = _starts(rule, text, folded)
        if not starts and starts is not None:
            continue  # the usual case: no needle, no match
        pieces: list[str] = []
        last = 0
        for m in _matches(rule, text, starts):
            out = _masked(rule.kind, m)
            if out is None:
                continue
            pieces += (text[last : m.start()], out)
            last = m.end()
            if found is not None:
                found.append(Secret(rule.kind, m.group(0)))
        if pieces:
            pieces.append(text[last:])
            text = "".join(pieces)
            folded[0] = None
    return text


def mask_value(
    value: Any, found: list[Secret] | None = None, kinds: Collection[str] | None = None
) -> Any:
    """The one walk: a JSON value with every string masked (object keys included) by
    :func:`mask_text`, and a string under a secret's name (``{"DB_PASSWORD": "x"}``) judged
    like the assignment ``DB_PASSWORD=x``; what was masked is appended to ``found``."""
    if isinstance(value, str):
        return mask_text(value, found, kinds)
    if isinstance(value, list):
        return [mask_value(x, found, kinds) for x in value]
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, x in value.items():
            if isinstance(k, str) and isinstance(x, str) and _SECRET_NAME.search(k):
                probe = f"{k}={x}"  # judged like an assignment in text, by every pattern
                if mask_text(probe) != probe:
                    if found is not None:
                        found.append(Secret("assignment", probe))
                    out[mask_text(k, found, kinds)] = "[REDACTED:assignment]"
                    continue
            key = mask_text(k, found, kinds) if isinstance(k, str) else k
            out[key] = mask_value(x, found, kinds)
        return out
    return value


def _masked(kind: str, m: re.Match[str]) -> str | None:
    """What the match ``m`` of ``kind`` becomes, or None when it is no secret."""
    mask = f"[REDACTED:{kind}]"
    if kind == "assignment":
        found = _assignment_value(m)
        if found is None:
            return None
        whole, start, end = m.group(0), found[0] - m.start(), found[1] - m.start()
        return whole[:start] + mask + whole[end:]
    if kind == "bearer":
        return m.group(1) + mask
    if kind == "url-password":
        if m.group(2).startswith(_MASKED):
            return None
        return m.group(1) + mask + m.group(3)
    return mask


# -- where a pattern can match: the fast finder ------------------------------------------------
#
# Running a pattern over a text costs a regex step at every position: the case-insensitive
# assignment pattern ~50 ns a character (6 KB of code in a tool result: ~0.3 ms), the others
# with their leading lookbehind about as much. But every match contains a literal, a needle,
# at a known distance from where the match starts (``sk-`` at 0; ``key`` at 0, 3, 4, 6, 7 or 8
# for key, apikey, api_key, accesskey, access_key, private_key; ``://`` at the end of the
# scheme). So the needles are found in C (str.find, ~1 ns a character; the keywords by a
# regex led by one byte, which also checks the ":" or "=" that must follow, so the ~80
# ``token_list`` of a tool result never reach Python), and the pattern is tried only where a
# needle puts a possible start, left to right, resuming after each match:
# exactly the matches ``pattern.finditer`` finds (tests/test_redaction_fast.py holds them
# equal), since a start without a needle cannot match and ``match(text, pos)`` is the same
# attempt as a search's at ``pos`` (lookbehinds and ``\b`` see the text before ``pos``).
#
# The case-insensitive patterns' needles are found in ``text.lower()``: a character the regex
# equates with an ASCII letter of a needle lowers to that letter, and lowering keeps every
# position, except for three characters (found by trying every code point: ``İ ı`` match
# ``i`` and ``ſ`` matches ``s`` but lower to something else, ``İ`` to two characters); a text
# with one of them is searched with the plain pattern.

ANY = "*"  #: In ``kinds``: every pattern.
_UNFOLDED = ("\u0130", "\u0131", "\u017f")
_FOLLOW = r"[\"']?[ \t]*[:=]"  # what follows a keyword in an assignment (see the pattern)
_NOT_SCHEME = re.compile(r"(?s).*[^A-Za-z0-9+.\-]")  # up to the last non-scheme character


class _Rule(NamedTuple):
    kind: str
    pattern: re.Pattern[str]
    #: (needle, distances back from a hit to where a match may start, None or a regex of
    #: hits); no distance: the start of the URL scheme. A regex (keywords, with what must
    #: follow them) is led by the needle, a byte rarer than the keyword's first where one
    #: is ("k" for token); the distances are per branch, by the empty group that ends it.
    #: Its finditer finds every hit: no keyword overlaps itself or starts in a follow.
    needles: tuple[tuple[str, tuple[tuple[int, ...], ...], re.Pattern[str] | None], ...]
    folded: bool  #: needles are looked for in text.lower()
    #: Characters of which a match holds one (an assignment: ":" or "="); () for none.
    requires: tuple[str, ...] = ()


def _rule(kind: str, *needles: str, folded: bool = False) -> _Rule:
    return _Rule(kind, _PATTERN_OF[kind], tuple((n, ((0,),), None) for n in needles), folded)


def _scheme_start(text: str, at: int) -> int:
    """Where the run of URL scheme characters that ends at ``at`` starts."""
    while True:
        lo = max(0, at - 64)
        chunk = text[lo:at]
        m = _NOT_SCHEME.match(chunk)
        if m is not None:
            return lo + m.end()
        if lo == 0:
            return 0
        at = lo


def _starts(rule: _Rule, text: str, folded: list[str | None]) -> list[int] | None:
    """The positions where ``rule``'s pattern may match in ``text``, in order; None when
    only the plain pattern can tell (a case-insensitive rule over a text that lowering
    would shift)."""
    for c in rule.requires:  # most strings of a line (ids, names, keys) hold none
        if c in text:
            break
    else:
        if rule.requires:
            return []
    hay = text
    if rule.folded:
        hay_or_none = folded[0]
        if hay_or_none is None:
            if not text.isascii() and any(c in text for c in _UNFOLDED):
                return None
            hay_or_none = folded[0] = text.lower()
        hay = hay_or_none
    starts: set[int] = set()
    find = hay.find
    for needle, backs, regex in rule.needles:
        at = find(needle)
        if at < 0:
            continue
        if regex is not None:  # keywords: their hits, with what must follow, found in C
            hits = [(m.start(), backs[(m.lastindex or 1) - 1]) for m in regex.finditer(hay, at)]
        else:
            hits = []
            while at >= 0:
                hits.append((at, backs[0]))
                at = find(needle, at + 1)
        for at, back in hits:
            if not back:
                starts.add(_scheme_start(text, at))
            for b in back:
                if b <= at:
                    starts.add(at - b)
    return sorted(starts)


def _matches(rule: _Rule, text: str, starts: list[int] | None) -> Iterator[re.Match[str]]:
    """The matches of ``rule.pattern`` in ``text``, exactly as ``finditer`` gives them, given
    :func:`_starts`."""
    if starts is None:
        yield from rule.pattern.finditer(text)
        return
    match = rule.pattern.match
    resume = 0
    for at in starts:
        if at < resume:
            continue  # inside the previous match: a search resumes after it
        m = match(text, at)
        if m is not None:
            yield m
            resume = m.end()  # every pattern's match is non-empty


_PATTERN_OF = dict(_PATTERNS)
_RULES: tuple[_Rule, ...] = (
    _rule("private-key", "-----BEGIN"),
    _rule("anthropic-key", "sk-ant-"),
    _rule("openai-key", "sk-"),
    _rule("aws-access-key", "AKIA", "ASIA", "ABIA", "ACCA"),
    _rule("github-token", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    _rule("slack-token", *(f"xox{c}-" for c in "abposr"), "xapp-"),
    _rule("google-api-key", "AIza"),
    _rule("jwt", "eyJ"),
    _rule("bearer", "authorization", "bearer", folded=True),
    _Rule("url-password", _PATTERN_OF["url-password"], (("://", ((),), None),), False),
    _Rule(
        "assignment",
        _PATTERN_OF["assignment"],
        (
            ("p", ((0,),), re.compile(r"p(?:ass(?:word|wd|phrase)?|wd)" + _FOLLOW)),
            # token (from its "k"); key, apikey, api_key, accesskey, access_key, privatekey,
            # private_key (from the "k" of key)
            ("k", ((2,), (0, 3, 4, 6, 7, 8)), re.compile(r"k(?:(?<=tok)en()|ey())" + _FOLLOW)),
            # secret (from its "c"), credential(s)
            ("c", ((2,), (0,)), re.compile(r"c(?:(?<=sec)ret()|redentials?())" + _FOLLOW)),
        ),
        True,
        (":", "="),
    ),
)
assert [r.kind for r in _RULES] == [k for k, _ in _PATTERNS]  # the same order, every pattern
_RULES_FOR: dict[frozenset[str], tuple[_Rule, ...]] = {}


def _rules_for(kinds: frozenset[str]) -> tuple[_Rule, ...]:
    """The rules of ``kinds`` (``"*"``: all), in order; a few sets recur (the screen's)."""
    rules = _RULES_FOR.get(kinds)
    if rules is None:
        rules = _RULES if ANY in kinds else tuple(r for r in _RULES if r.kind in kinds)
        if len(_RULES_FOR) < 4096:
            _RULES_FOR[kinds] = rules
    return rules


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
