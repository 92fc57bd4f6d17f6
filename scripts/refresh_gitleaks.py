"""Refresh the vendored gitleaks rules: ``jsonltape/interop/_gitleaks.json``, its licence, and the
rules' own examples for the tests.

    python scripts/refresh_gitleaks.py GITLEAKS_CHECKOUT [--ref v8.30.1]

GITLEAKS_CHECKOUT is a git clone of https://github.com/gitleaks/gitleaks; the rules are read at
``--ref`` (a tag): ``config/gitleaks.toml`` (the rule set: id, regex, secretGroup, entropy,
keywords, allowlists), ``LICENSE`` (MIT) and the generators under
``cmd/generate/config/rules/*.go``, whose literal true and false positives become
``tests/fixtures/gitleaks_examples.json`` (generated samples, built by Go code at run time, are
not literals and are left out).

The data keeps each rule's Go regex as gitleaks wrote it; :mod:`jsonltape.interop._re2`
translates it when the rule is loaded. A rule it cannot translate, a rule that only applies to
some file paths (a session's text has none) and a rule without a regex are reported and left
out. Beside each rule the script records where a match can start (derived here from the
translated pattern, checked by tests/test_secret_rules.py): the literal every match begins
with, and the width of a leading lazy ``[\\w.-]{0,N}?`` (gitleaks' "semi-generic" rules) that
comes before it.

Needs Python 3.11+ (``tomllib``) or ``tomli``; the package itself reads only the JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

if sys.version_info >= (3, 11):
    import re._constants as C
    import re._parser as sre_parse
else:  # pragma: no cover - 3.10
    import sre_constants as C
    import sre_parse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jsonltape.interop._re2 import Untranslatable, translate  # noqa: E402

DATA = ROOT / "jsonltape" / "interop" / "_gitleaks.json"
LICENCE = ROOT / "jsonltape" / "interop" / "_gitleaks_LICENSE.txt"
EXAMPLES = ROOT / "tests" / "fixtures" / "gitleaks_examples.json"
SOURCE = "https://github.com/gitleaks/gitleaks"

MAX_ANCHORS = 64
MAX_ANCHOR_LEN = 12
#: The most positions before its literal a match may start at (a bounded run before it).
MAX_BACK = 16


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


# -- where a match can start ------------------------------------------------------------------


def _class_chars(items: Any, ci: bool) -> set[str] | None:
    """The characters a small class matches (None for a large one or a category)."""
    chars: set[str] = set()
    for op, av in items:
        if op is C.LITERAL:
            chars.add(chr(av))
        elif op is C.RANGE and av[1] - av[0] < 4:
            chars.update(chr(c) for c in range(av[0], av[1] + 1))
        else:
            return None
    if ci:
        chars = {c.lower() for c in chars}
    return chars if len(chars) <= 4 else None


_IDENTIFIER_RUN = sorted(
    [(C.IN, [(C.CATEGORY, C.CATEGORY_WORD), (C.LITERAL, ord(".")), (C.LITERAL, ord("-"))])]
)


def _lazy_run(op: Any, av: Any) -> int | None:
    """N for a lazy ``[\\w.-]{0,N}?`` (gitleaks' semi-generic rules start with one)."""
    if op is C.MIN_REPEAT and av[0] == 0 and len(av[2]) == 1:
        sub_op, sub_av = av[2][0]
        if sub_op is C.IN and sorted(sub_av) == sorted(_IDENTIFIER_RUN[0][1]):
            return int(av[1])
    return None


class _Walk:
    """The state of one derivation: the lazy runs met before anything else."""

    def __init__(self) -> None:
        self.prefix = 0

    def firsts(self, items: Any, ci: bool, start: bool) -> tuple[set[tuple[str, bool]], bool]:
        """(prefixes, complete): every match of ``items`` starts with one of the prefixes (each
        with whether it was read case-insensitively); complete when each prefix is the whole
        of what ``items`` can match (so a caller may go on past it). ``start``: nothing was
        matched before ``items``, so a lazy identifier run there counts as the prefix."""
        acc: set[tuple[str, bool]] = {("", False)}

        def extend(options: set[tuple[str, bool]]) -> bool:
            """Add ``options`` to every prefix; False when the prefixes stop here (too many,
            or cut at MAX_ANCHOR_LEN: a cut prefix still starts every match)."""
            nonlocal acc
            new = {((a + o)[:MAX_ANCHOR_LEN], aci or oci) for a, aci in acc for o, oci in options}
            if len(new) > MAX_ANCHORS:
                return False
            acc = new
            return all(len(a) + len(o) <= MAX_ANCHOR_LEN for a, _ in acc for o, _ in options)

        for op, av in items:
            at_start = start and acc == {("", False)}
            if op is C.AT or op in (C.ASSERT, C.ASSERT_NOT):
                continue  # zero-width: \\b, ^, lookarounds
            run = _lazy_run(op, av) if at_start else None
            if run is not None:
                self.prefix += run
                continue
            if op is C.LITERAL:
                ch = chr(av)
                if not extend({(ch.lower() if ci else ch, ci and ch.lower() != ch.upper())}):
                    return acc, False
            elif op is C.IN:
                chars = _class_chars(av, ci)
                if chars is None or not extend({(c, ci) for c in chars}):
                    return acc, False
            elif op is C.SUBPATTERN:
                _group, add, remove, sub = av
                sub_ci = (ci or bool(add & C.SRE_FLAG_IGNORECASE)) and not (
                    remove & C.SRE_FLAG_IGNORECASE
                )
                found, complete = self.firsts(sub, sub_ci, at_start)
                if not extend(found) or not complete:
                    return acc, False
            elif op is C.BRANCH:
                options: set[tuple[str, bool]] = set()
                all_complete = True
                for alt in av[1]:
                    found, complete = self.firsts(alt, ci, False)
                    options |= found
                    all_complete = all_complete and complete
                if not extend(options) or not all_complete:
                    return acc, False
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
                lo, hi, sub = av
                if lo < 1:
                    return acc, False
                found, complete = self.firsts(sub, ci, False)
                if not extend(found) or not (complete and lo == hi == 1):
                    return acc, False
            else:
                return acc, False
        return acc, True


def _usable(found: set[tuple[str, bool]]) -> list[list[Any]] | None:
    literals = sorted(found)
    if not literals or any(text == "" for text, _ in literals):
        return None
    return [[text, case] for text, case in literals]


def _group(parsed: Any, ci: bool) -> dict[str, Any] | None:
    """Where a match of the parsed sequence ``parsed`` can start (see :func:`anchors`)."""
    walk = _Walk()
    literals = _usable(walk.firsts(parsed, ci, True)[0])
    if literals is not None:
        return {"prefix": walk.prefix, "back": [0, 0], "literals": literals}
    # A bounded run before the first literal: the literal starts lo..hi characters in.
    items = list(parsed)
    for i in range(1, len(items)):
        before = sre_parse.SubPattern(parsed.state, items[:i])
        lo, hi = before.getwidth()
        if hi - lo > MAX_BACK:
            break
        walk = _Walk()
        rest = sre_parse.SubPattern(parsed.state, items[i:])
        literals = _usable(walk.firsts(rest, ci, False)[0])
        if literals is not None and max(len(t) for t, _ in literals) >= 2:
            return {"prefix": 0, "back": [lo, hi], "literals": literals}
    return None


def anchors(pattern: str) -> list[dict[str, Any]] | None:
    """Where a match of the translated ``pattern`` can start, or None when no literal tells.

    A list of groups ``{"prefix": N, "back": [lo, hi], "literals": [[text, ci], ...]}``, one for
    the pattern, or one for each of its alternatives at the top when they differ (``a lazy
    identifier run then a name | a token``): every match holds one of a group's literals
    (``ci``: lowercased, to compare case-insensitively); with N > 0 the match starts with a
    lazy run of up to N ``[\\w.-]`` that ends where the literal starts; else the literal
    starts ``lo`` to ``hi`` characters after the match does.
    """
    parsed = sre_parse.parse(pattern, re.ASCII)
    ci = bool(parsed.state.flags & C.SRE_FLAG_IGNORECASE)
    whole = _group(parsed, ci)
    if whole is not None:
        return [whole]
    if len(parsed) == 1 and parsed[0][0] is C.BRANCH:
        groups = [_group(sre_parse.SubPattern(parsed.state, alt), ci) for alt in parsed[0][1][1]]
        if all(g is not None for g in groups):
            return groups  # type: ignore[return-value]
    return None


# -- the rules --------------------------------------------------------------------------------


def _allowlists(rule_id: str, raw: list[dict[str, Any]], report: list[str]) -> list[Any]:
    out = []
    for a in raw:
        condition = a.get("condition", "OR").upper()
        if a.get("paths") and condition == "AND":
            report.append(f"{rule_id}: an allowlist that needs a file path (never applies)")
            continue
        entry: dict[str, Any] = {}
        if condition == "AND":
            entry["condition"] = "AND"
        if a.get("regexTarget"):
            entry["regexTarget"] = a["regexTarget"]
        if a.get("regexes"):
            entry["regexes"] = a["regexes"]
        if a.get("stopwords"):
            entry["stopwords"] = sorted({w.lower() for w in a["stopwords"]})
        if a.get("commits"):
            report.append(f"{rule_id}: an allowlist's commits (never apply to a session)")
        if "regexes" in entry or "stopwords" in entry:
            out.append(entry)
    return out


def convert(config: dict[str, Any], report: list[str]) -> tuple[list[Any], list[Any]]:
    """(rules, left out) from gitleaks' parsed TOML."""
    rules, left = [], []
    for r in config["rules"]:
        rid = r["id"]
        why = None
        if "regex" not in r:
            why = "a file-path rule without a regex (a session's text has no file path)"
        elif r.get("path"):
            why = "applies only to files whose path matches " + r["path"]
        else:
            try:
                pattern = translate(r["regex"])
                re.compile(pattern, re.ASCII)
                for a in r.get("allowlists", []):
                    for x in a.get("regexes", []):
                        re.compile(translate(x), re.ASCII)
            except (Untranslatable, re.error) as exc:
                why = f"not translated: {exc}"
        if why is not None:
            left.append({"id": rid, "why": why})
            report.append(f"{rid}: left out ({why})")
            continue
        rule: dict[str, Any] = {"id": rid, "regex": r["regex"]}
        if r.get("secretGroup"):
            rule["secretGroup"] = r["secretGroup"]
        if r.get("entropy"):
            rule["entropy"] = r["entropy"]
        rule["keywords"] = sorted({k.lower() for k in r.get("keywords", [])})
        allow = _allowlists(rid, r.get("allowlists", []), report)
        if allow:
            rule["allowlists"] = allow
        rule["anchors"] = anchors(translate(r["regex"]))
        if rule["anchors"] is None:
            report.append(f"{rid}: no literal starts every match (searched whole)")
        rules.append(rule)
    return rules, left


# -- the generators' literal examples ---------------------------------------------------------

_RULE_ID = re.compile(r'RuleID:\s*"([^"]+)"')
_LIST_START = re.compile(r"\b(tps|fps)\s*(?::=|=)\s*(?:\[\]string\s*\{|append\(\s*(?:tps|fps)\s*,)")
_GO_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _go_string(src: str, i: int) -> tuple[str, int]:
    """The Go string literal at ``src[i]`` and where it ends."""
    if src[i] == "`":
        end = src.index("`", i + 1)
        return src[i + 1 : end], end + 1
    out, i = [], i + 1
    while src[i] != '"':
        c = src[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = src[i + 1]
        if e in _GO_ESCAPES:
            out.append(_GO_ESCAPES[e])
            i += 2
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            out.append(chr(int(src[i + 2 : i + 2 + width], 16)))
            i += 2 + width
        elif e.isdigit():
            out.append(chr(int(src[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(e)
            i += 2
    return "".join(out), i + 1


def _skip(src: str, i: int) -> int:
    """Past blanks and comments."""
    while i < len(src):
        if src[i].isspace():
            i += 1
        elif src.startswith("//", i):
            i = src.find("\n", i)
            i = len(src) if i < 0 else i
        elif src.startswith("/*", i):
            i = src.index("*/", i) + 2
        else:
            break
    return i


def _literal_items(src: str, i: int) -> tuple[list[str], int]:
    """The elements of the list or call that opens before ``i`` that are one string literal
    each (not joined with ``+``, not a call's result), and where the list closes."""
    items: list[str] = []
    depth = 0
    while i < len(src):
        i = _skip(src, i)
        c = src[i]
        if c in '`"' and depth == 0:
            text, j = _go_string(src, i)
            j2 = _skip(src, j)
            if src[j2] in ",)}":
                items.append(text)
                i = j2
                continue
            i = j
            while True:  # an expression: skip to the end of this element
                i = _skip(src, i)
                c = src[i]
                if c in '`"':
                    _t, i = _go_string(src, i)
                elif c in "([{":
                    depth += 1
                    i += 1
                elif c in ")]}" and depth:
                    depth -= 1
                    i += 1
                elif c in ",)}" and not depth:
                    break
                else:
                    i += 1
            continue
        if c in '`"':
            _t, i = _go_string(src, i)
        elif c in "([{":
            depth += 1
            i += 1
        elif c in ")]}":
            if depth == 0:
                return items, i
            depth -= 1
            i += 1
        else:
            i += 1
    return items, i


def examples(sources: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """Rule id -> {"tp": [...], "fp": [...]}: the literal examples of each generator function."""
    found: dict[str, dict[str, list[str]]] = {}
    for src in sources.values():
        funcs = re.split(r"\nfunc ", src)
        for body in funcs[1:]:
            ids = _RULE_ID.findall(body)
            if len(ids) != 1 or "ValidateWithPaths" in body:
                continue
            entry = found.setdefault(ids[0], {"tp": [], "fp": []})
            for m in _LIST_START.finditer(body):
                items, _end = _literal_items(body, m.end())
                entry[m.group(1)[:2]] += items
    return {k: v for k, v in sorted(found.items()) if v["tp"] or v["fp"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkout", type=Path, help="a git clone of gitleaks")
    ap.add_argument("--ref", default="v8.30.1", help="the tag to read (default: v8.30.1)")
    args = ap.parse_args()
    repo, ref = args.checkout, args.ref
    commit = git(repo, "rev-parse", f"{ref}^{{commit}}").strip()
    config = tomllib.loads(git(repo, "show", f"{commit}:config/gitleaks.toml"))
    licence = git(repo, "show", f"{commit}:LICENSE")
    report: list[str] = []
    rules, left = convert(config, report)
    glob = config.get("allowlist", {})
    data = {
        "source": SOURCE,
        "version": ref,
        "commit": commit,
        "licence": "MIT (see _gitleaks_LICENSE.txt)",
        "generated_by": "scripts/refresh_gitleaks.py",
        "allowlist": {
            "regexes": glob.get("regexes", []),
            "stopwords": sorted({w.lower() for w in glob.get("stopwords", [])}),
        },
        "rules": rules,
        "left_out": left,
    }
    DATA.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    LICENCE.write_text(
        f"The rules in _gitleaks.json are gitleaks' default rule set ({SOURCE}),\n"
        f"version {ref}, commit {commit}, converted from config/gitleaks.toml by\n"
        "scripts/refresh_gitleaks.py. They are used under gitleaks' licence:\n\n" + licence,
        encoding="utf-8",
    )
    listing = git(repo, "ls-tree", "--name-only", f"{commit}:cmd/generate/config/rules")
    sources = {
        name: git(repo, "show", f"{commit}:cmd/generate/config/rules/{name}")
        for name in listing.split()
        if name.endswith(".go") and not name.endswith("_test.go")
    }
    kept = {r["id"] for r in rules}
    found = {k: v for k, v in examples(sources).items() if k in kept}
    EXAMPLES.write_text(
        json.dumps({"version": ref, "commit": commit, "rules": found}, indent=1, ensure_ascii=False)
        + "\n",
        encoding="utf-8",
    )
    print(f"gitleaks {ref} ({commit}): {len(rules)} rules kept, {len(left)} left out")
    print(f"examples: {sum(len(v['tp']) for v in found.values())} true positives, ", end="")
    print(f"{sum(len(v['fp']) for v in found.values())} false positives of {len(found)} rules")
    for line in report:
        print("  " + line)


if __name__ == "__main__":
    main()
