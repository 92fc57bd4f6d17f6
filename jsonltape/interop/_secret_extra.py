"""The supplement to gitleaks' rules: shapes it has no rule for (listed in
:mod:`jsonltape.interop._secret_rules`), each with cases in tests/test_redaction_table.py.

Patterns are Python syntax here (they are ours); the anchors say where a match can start, as
the refresh script derives them for gitleaks' rules (tests/test_secret_rules.py holds the
matches found from them equal to ``finditer``'s).
"""

from __future__ import annotations

import re

from ._secret_rule import Anchor, Rule

__all__ = ["SUPPLEMENT"]

_B = r"(?<![A-Za-z0-9])"  # not after a letter or digit (``_`` may precede: ``MY_sk-…``)
_KEYWORD = (
    r"(?:password|passwd|passphrase|pwd|pass|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|credentials?|key)"
)
#: A shell word: quoted, or a run of non-blanks.
_WORD = r"""('[^'\n]*'|"[^"\n]*"|[^\s'"]\S*)"""
_MASKED = ("[REDACTED", "\\[REDACTED")  # masked already (the second: escaped by Markdown)
_SKIP_VALUES = frozenset(
    {"", "null", "none", "nil", "undefined", "true", "false", "***", "redacted", "[redacted]"}
)
#: A value that is a type, not a secret: ``password: str``, ``token: Optional[str]``.
_TYPE_WORDS = frozenset(
    [
        *("str", "string", "bytes", "int", "integer", "bool", "boolean", "float", "number"),
        *("any", "object", "optional", "secretstr", "secretbytes", "text", "varchar", "char"),
        *("list", "dict", "required"),
    ]
)
#: Words that begin an expression in code (the value of ``key = await fetch()``).
_CODE_WORDS = frozenset(
    ["await", "new", "yield", "async", "typeof", "function", "lambda", "not", "this", "self"]
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
#: A name ending in a keyword, matched whole (a JSON object's key: ``{"DB_PASSWORD": …}``).
SECRET_NAME = re.compile(r"(?i)" + _KEYWORD + r"$")


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
    """Whether nothing but blanks and closing quotes or brackets follows ``at`` on its line
    (``"password: correcthorse",`` printed as a JSON string ends its value too)."""
    end = text.find("\n", at)
    return not text[at : end if end >= 0 else len(text)].strip(" \t\r\"',;)]}")


def _assignment(m: re.Match[str]) -> tuple[int, int] | None:
    """Where the secret value of an assignment match is, or None when it is none."""
    strength = _strength(_name(m.string, m.start(1)) + m.group(1))
    if strength is None:
        return None
    g = next(g for g in (4, 5, 6) if m.group(g) is not None)
    value = m.group(g)
    start, end = m.span(g)
    if g == 6 and "</" in value:  # a value in rendered HTML ends where a tag closes
        value = value[: value.index("</")]
        end = start + len(value)
    if value.lower() in _SKIP_VALUES or value.startswith(("$", "<", "{", "%", "`", *_MASKED)):
        return None  # empty, a placeholder, a variable or template, or masked already
    if "..." in value or "\u2026" in value or not any(c.isalnum() for c in value):
        return None  # elided (sk-ant-..., <your key>…) or punctuation: a placeholder
    if g == 6 and value in _CODE_WORDS:
        return None  # apiKey = await getApiKey(): code, not a value
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
    return start, end


def _group(n: int) -> object:
    def judge(m: re.Match[str]) -> tuple[int, int] | None:
        value = m.group(n)
        if value.startswith(_MASKED) or value.strip("'\"") in ("", "***"):
            return None
        return m.span(n)

    return judge


def _word_value(n: int) -> object:
    """The shell word of group ``n``, without its quotes; a variable (``$PW``) is no secret."""

    def judge(m: re.Match[str]) -> tuple[int, int] | None:
        start, end = m.span(n)
        if m.string[start] in "'\"":
            start, end = start + 1, end - 1
        value = m.string[start:end]
        if not value or value.startswith(("$", *_MASKED)):
            return None
        return start, end

    return judge


def _rule(kind: str, pattern: str, *anchors: str, folded: bool = False, **kw: object) -> Rule:
    return Rule(
        kind,
        pattern,
        source="jsonltape",
        keywords=[a.lower() for a in anchors],
        anchors=[Anchor(a.lower() if folded else a, folded) for a in anchors],
        **kw,  # type: ignore[arg-type]
    )


SUPPLEMENT: tuple[Rule, ...] = (
    _rule("anthropic-key", _B + r"sk-ant-[A-Za-z0-9_\-]{20,}", "sk-ant-"),
    _rule(
        "openai-key",
        _B + r"sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z_\-]*[0-9])[A-Za-z0-9_\-]{20,}",
        "sk-",
        entropy=3.0,
    ),
    _rule(
        "private-key-block",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"
        r"(?:(?s:.)*?-----END[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|[A-Za-z0-9+/=\s\\:-]*)",
        "-----BEGIN",
    ),
    _rule(
        "azure-storage-key",
        r"(?i)(?<![A-Za-z0-9])(?:Account|SharedAccess)Key[ \t]*=[ \t]*([A-Za-z0-9+/]{20,}={0,2})",
        "AccountKey",
        "SharedAccessKey",
        folded=True,
        judge=_group(1),
    ),
    _rule(
        "mysql-password",
        r"(?<![\w-])mysql(?:dump|admin|import|check|slap|sh)?[ \t][^\n]*?(?<=\s)-p(?=[^\s])"
        + _WORD,
        "mysql",
        judge=_word_value(1),
    ),
    _rule(
        "docker-login-password",
        r"(?<![\w-])docker[ \t]+login[ \t][^\n]*?(?<=\s)(?:-p|--password)(?:[ \t]+|=)" + _WORD,
        "docker",
        judge=_word_value(1),
    ),
    _rule(
        "bearer",
        r"(?i)(\bauthorization\s*[:=]\s*[\"']?(?:bearer|basic|token)\s+|\bbearer\s+)"
        r"(?=[A-Za-z\-._~+/]*[0-9])([A-Za-z0-9\-._~+/]{8,}=*)",
        "authorization",
        "bearer",
        folded=True,
        judge=_group(2),
    ),
    # RFC 3986 userinfo: user (maybe empty) ":" password "@" host. People leave "/", "@" and
    # ":" unencoded in passwords, so the password runs to the LAST "@" of the address that a
    # host follows; masking too much of a rare path with "@" beats leaking a tail.
    Rule(
        "url-password",
        r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@\[\]\"'<>`]*:)"
        r"([^\s\"'<>`]{1,256})(@)(?=(?:[A-Za-z0-9\-._~%]+|\[[0-9A-Fa-f:.]+\])(?::\d*)?"
        r"(?:[/?#\s\"'<>`),;\]]|$))",
        source="jsonltape",
        keywords=["://"],
        anchors=[Anchor("://", False, prefix=-1)],  # the scheme before it: any length
        run=r"[A-Za-z0-9+.\-]",
        judge=_group(2),  # type: ignore[arg-type]
    ),
    # name=value, name: value, "name": "value", export NAME=value, NAME='value' ... for a
    # name ending in a keyword (see _strength). The match starts at the keyword; the rest of
    # the name is read backwards from there, so no run of text is scanned more than once.
    Rule(
        "assignment",
        r"(?i)(?=[pstakc])(" + _KEYWORD + r")(?![A-Za-z0-9_])"
        r"([\"']?)([ \t]*[:=][ \t]*)"
        r"(?:\"((?:[^\"\\\n]|\\.)*)\"|'([^'\n]*)'|(?!\\)([^\s\"'`,;&)}\]]+))",
        source="jsonltape",
        keywords=["pass", "pwd", "secret", "token", "key", "credential"],
        anchors=[
            Anchor(a, True)
            for a in ("pass", "pwd", "secret", "token", "api", "access", "private", "key", "cred")
        ],
        judge=_assignment,
    ),
)
