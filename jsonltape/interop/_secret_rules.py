"""The secret rules: gitleaks' default rule set (vendored, ``_gitleaks.json``) and a small
supplement of shapes it lacks, each one a :class:`Rule` judged as gitleaks judges its own.

**gitleaks.** ``_gitleaks.json`` holds the rules of gitleaks (version, commit and MIT licence in
that file and ``_gitleaks_LICENSE.txt``) as ``scripts/refresh_gitleaks.py`` converted them from
its ``config/gitleaks.toml``: each rule's Go regex as written, its secret group, entropy
threshold, keywords and allowlists, and where its matches can start (derived by the script,
checked by tests/test_secret_rules.py). A match counts as gitleaks counts it: one of the rule's
keywords is in the text (lowercased), the regex matches, the secret is the rule's secret group
(else its first non-empty group, else the whole match; a rule whose groups are all named, which
mark what was seen rather than the secret, has the whole match), its Shannon entropy is above
the rule's threshold, and no allowlist of the rule or the global one accepts it (a regex on the
secret, the match or its line; a stopword in the secret). Not carried over: rules and allowlists
that need a file path (a session's text has none), ``gitleaks:allow`` comments (text in a
session is data, not a reviewed source file) and decoding of base64/hex/percent-encoded text.

**The supplement** (``source="jsonltape"``), kept because gitleaks has no rule for them:

=========================  ==================================================================
kind                       what
=========================  ==================================================================
``anthropic-key``          ``sk-ant-…`` of any length (gitleaks wants a whole api03/admin01 key)
``openai-key``             ``sk-…`` / ``sk-proj-…`` without gitleaks' ``T3BlbkFJ`` marker
``private-key-cut``        ``-----BEGIN … PRIVATE KEY-----`` and the base64 after it, when no
                           END line follows (a key cut off in a tool's output)
``azure-storage-key``      ``AccountKey=…`` / ``SharedAccessKey=…`` in a connection string
``mysql-password``         ``mysql … -pPASSWORD`` (mysqldump, mysqladmin too)
``docker-login-password``  ``docker login … -p PASSWORD`` / ``--password PASSWORD``
``bearer``                 ``Bearer <token>``, ``Authorization: Basic|Token <credentials>``
``url-password``           the password in ``scheme://user:password@host`` (RFC 3986 userinfo;
                           the user may be empty; the password runs to the last ``@`` a host
                           follows, so ``/``, ``@`` and ``:`` in it do not leak)
``assignment``             the value of ``NAME=value``, ``NAME: value``, ``"NAME": "value"``,
                           ``export NAME='value'`` for names ending in password, passwd,
                           passphrase, pwd, secret, token, api key, access key, private key,
                           credential(s), and ``NAME_KEY`` / ``NAME_PASS`` in upper case; no
                           entropy or length bound (``password: hunter2``), but not a type
                           (``password: str``), code (``getpass()``), a variable or template
                           (``$DB_PASSWORD``, ``{{ vault_token }}``) or prose after a bare
                           keyword (``token: we need it``)
=========================  ==================================================================

Rules are tried in this order, and a span two rules find is counted as the first one's:
gitleaks' specific rules, the supplement, then the generic ones (gitleaks' ``generic-api-key``
and the supplement's ``assignment``), as gitleaks lets a specific rule's finding win over a
generic one's.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

from ._secret_extra import SUPPLEMENT
from ._secret_rule import Allow, Anchor, Rule

__all__ = ["Anchor", "Rule", "gitleaks", "rules", "secret_span"]

_DATA = Path(__file__).with_name("_gitleaks.json")


def entropy(text: str) -> float:
    """Shannon entropy of ``text`` in bits per character, as gitleaks computes it (characters
    counted, the length taken in UTF-8 bytes)."""
    if not text:
        return 0.0
    size = len(text.encode("utf-8", "surrogatepass"))
    return -sum(n / size * math.log2(n / size) for n in Counter(text).values())


def _line(text: str, start: int, end: int) -> str:
    lo = text.rfind("\n", 0, start) + 1
    hi = text.find("\n", end)
    return text[lo : hi if hi >= 0 else len(text)]


def secret_span(rule: Rule, m: re.Match[str]) -> tuple[int, int] | None:
    """Where the secret of ``rule``'s match ``m`` is, or None when gitleaks would not count it
    (low entropy, an allowlist accepts it)."""
    if rule.judge is not None:
        return rule.judge(m)
    regex = rule.regex
    span = m.span()
    if rule.secret_group and rule.secret_group <= regex.groups:
        span = m.span(rule.secret_group)
    elif regex.groups and not rule.whole:
        span = next((m.span(g) for g in range(1, regex.groups + 1) if m.group(g)), span)
    text = m.string
    secret = text[span[0] : span[1]].strip("\n")
    if not secret or (rule.entropy and entropy(secret) <= rule.entropy):
        return None
    match = m.group(0).strip("\n")
    line = _line(text, m.start(), m.end())
    for allow in (*rule.allow, *gitleaks().allow):
        if allow.accepts(secret, match, line):
            return None
    return span


class _Source(NamedTuple):
    """The vendored rule set: where it came from and its global allowlist."""

    version: str
    commit: str
    allow: tuple[Allow, ...]


def _allow(raw: dict[str, Any]) -> Allow:
    return Allow(
        raw.get("condition") == "AND",
        raw.get("regexTarget", "secret"),
        raw.get("regexes") or (),
        raw.get("stopwords") or (),
    )


@functools.cache
def _load() -> tuple[_Source, list[Rule]]:
    """The vendored rule set, read on first use (a command that checks nothing never does)."""
    data = json.loads(_DATA.read_text(encoding="utf-8"))
    glob = data["allowlist"]
    source = _Source(data["version"], data["commit"], (_allow(glob),))
    out = []
    for r in data["rules"]:
        groups = r.get("anchors")
        anchors = None
        if groups is not None:
            anchors = [
                Anchor(t, f, g["prefix"], (g["back"][0], g["back"][1]))
                for g in groups
                for t, f in g["literals"]
            ]
        out.append(
            Rule(
                r["id"],
                r["regex"],
                source="gitleaks",
                keywords=r["keywords"],
                anchors=anchors,
                secret_group=r.get("secretGroup", 0),
                entropy=r.get("entropy", 0.0),
                allow=[_allow(a) for a in r.get("allowlists", [])],
            )
        )
    return source, out


def gitleaks() -> _Source:
    """Where the vendored rules come from (version, commit) and their global allowlist."""
    return _load()[0]


@functools.cache
def rules() -> tuple[Rule, ...]:
    """Every rule, in the order they are tried (see the module doc)."""
    vendored = _load()[1]
    specific = [r for r in vendored if not r.generic]
    generic = [r for r in vendored if r.generic]
    extra = [r for r in SUPPLEMENT if not r.generic]
    extra_generic = [r for r in SUPPLEMENT if r.generic]
    return (*specific, *extra, *generic, *extra_generic)
