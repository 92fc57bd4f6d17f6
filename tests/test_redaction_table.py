"""``--redact secrets`` as one table of positive and negative cases, through every format.

Each positive names the secret that must vanish (in every spelling an export could give it:
as is, HTML-escaped, JSON-escaped, Markdown-escaped) and the kind it is counted as; each
negative is text that must come out exactly as without redaction. The cases are messages of
real sessions exported by :func:`jsonltape.interop.export`.
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from pathlib import Path

import pytest

import jsonltape
from jsonltape.interop import export
from jsonltape.interop._render import _md_escape
from jsonltape.interop.export import FORMATS

#: (text, secret that must not survive, kind it is counted as)
POSITIVE = [
    ("redis://:hunter2pass@cache:6379/0", "hunter2pass", "url-password"),  # empty user
    ("postgres://app:pa/ss@w:rd@db.internal:5432/x", "pa/ss@w:rd", "url-password"),
    ("https://deploy:p@ssw0rd@example.com/repo.git", "p@ssw0rd", "url-password"),
    ("amqp://guest:s3cr/et@[::1]:5672", "s3cr/et", "url-password"),
    ("POSTGRES_PASSWORD: correcthorsebatterystaple", "correcthorsebatterystaple", "assignment"),
    ("  MYSQL_ROOT_PASSWORD: 'tr0ub4dor'", "tr0ub4dor", "assignment"),  # YAML, quoted
    ("DB_PASSWORD=letmeinplease", "letmeinplease", "assignment"),  # .env
    ('DB_SECRET="two words"', "two words", "assignment"),
    ("export GITLAB_TOKEN=glpatXYZabcdef", "glpatXYZabcdef", "assignment"),  # shell
    ("export AWS_SECRET_ACCESS_KEY='wJalrXUtnFEMIbPxRfiCY'", "wJalrXUtnFEMIbPxRfiCY", "assignment"),
    ('{"DB_PASSWORD": "qu\\"oted<&>"}', 'qu\\"oted<&>', "assignment"),  # JSON, escaped quote
    ("STRIPE_KEY=rk_live_abcdefgh", "rk_live_abcdefgh", "assignment"),
    ("SMTP_PASS: horsestaplebattery", "horsestaplebattery", "assignment"),
    ("ADMIN_PWD=Zebra", "Zebra", "assignment"),
    ("PGPASSWORD=pgsecretvalue psql -h db", "pgsecretvalue", "assignment"),
    ("password: correcthorsebattery", "correcthorsebattery", "assignment"),  # ends its line
    ("token: 8f14e45fceea167a", "8f14e45fceea167a", "assignment"),
    ("api_key = 'abc123def456'", "abc123def456", "assignment"),
    ("client_secret: xyzzyplughfoo", "xyzzyplughfoo", "assignment"),
    ("connect --password=Hunter2Hunter", "Hunter2Hunter", "assignment"),
]
NEGATIVE = [
    "password: str",  # a type annotation
    "db_password: Optional[str] = None",
    "token: we need it before the deploy",  # prose
    "Token: Authentication happens first",
    "primary_key: id",
    "sort_key = created_at",
    "first_pass: done",
    "token_count: 5, max_tokens=100",
    "password = getpass()",
    "password: $DB_PASSWORD",
    "token: {{ vault_token }}",
    "http://localhost:8080/path?a=b",
    "mail me at ada@example.com, or https://example.com/@ada",
    "the monkey: a primate",
]


def session(path: Path, texts: list[str]) -> Path:
    with jsonltape.open(path, create=True, durability="manual") as tape, tape.turn():
        for i, text in enumerate(texts):
            tape.user(text, id=f"u{i}")
    return path


def spellings(secret: str) -> set[str]:
    """Every way an export could spell ``secret``: as is and as a Markdown reader reads it
    (backslash escapes taken), each also HTML-, JSON- and Markdown-escaped."""
    out = set()
    for s in (secret, re.sub(r"\\(.)", r"\1", secret)):
        out |= {s, html.escape(s), html.escape(s, quote=False), json.dumps(s)[1:-1]}
        out.add(_md_escape(s))
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_positive_is_masked_and_counted(tmp_path: Path, fmt: str) -> None:
    path = session(tmp_path / "pos.jsonl", [text for text, _, _ in POSITIVE])
    plain = export(path, fmt).text  # type: ignore[arg-type]
    out = export(path, fmt, redact_secrets=True)  # type: ignore[arg-type]
    for text, secret, _kind in POSITIVE:
        assert any(s in plain for s in spellings(secret)), f"{fmt} never shows {text!r}"
        leaked = [s for s in spellings(secret) if s in out.text]
        assert not leaked, f"{fmt} leaks {leaked} of {text!r}"
    counts = Counter(kind for _, _, kind in POSITIVE)
    want = "redacted secrets: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    assert out.redacted == want


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_negative_is_touched(tmp_path: Path, fmt: str) -> None:
    path = session(tmp_path / "neg.jsonl", NEGATIVE)
    out = export(path, fmt, redact_secrets=True)  # type: ignore[arg-type]
    assert out.text == export(path, fmt).text  # type: ignore[arg-type]
    assert out.redacted == "redacted secrets: none found"


def test_masks_keep_the_structure_around_them(tmp_path: Path) -> None:
    path = session(tmp_path / "ctx.jsonl", [text for text, _, _ in POSITIVE])
    text = export(path, "json", redact_secrets=True).text
    assert "redis://:[REDACTED:url-password]@cache:6379/0" in text
    assert "postgres://app:[REDACTED:url-password]@db.internal:5432/x" in text
    assert "POSTGRES_PASSWORD: [REDACTED:assignment]" in text
    assert "export GITLAB_TOKEN=[REDACTED:assignment]" in text
    assert '{\\"DB_PASSWORD\\": \\"[REDACTED:assignment]\\"}' in text
