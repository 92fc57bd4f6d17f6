"""Refresh the price table jsonltape ships (jsonltape/usage/prices.json) from LiteLLM.

LiteLLM keeps the most used table of model prices (``model_prices_and_context_window.json``)
and ships a copy of it in every ``litellm`` wheel on PyPI
(``litellm/model_prices_and_context_window_backup.json``, MIT licence). This script downloads
that wheel (``pip download litellm==VERSION --no-deps``; the newest without ``--version``),
or reads one given with ``--wheel``, and writes the members ``jsonltape usage`` prices with
(per-token input, output, cache write and read, reasoning rates, their long-context tiers, the
fast-mode multiplier) of every chat, responses and completion model that has an input and an
output rate, with the wheel's version, its upload date on PyPI and the licence.

``jsonltape usage`` never makes a network call: this is run by hand, and the result committed.

A price, once shipped, is never dropped: LiteLLM removes models their providers retired
(releases after 1.103.6 lack ``claude-sonnet-4-20250514``), but the sessions that used them stay in
people's archives and cost what they cost. A model the previous ``prices.json`` had and the new
release lacks is kept as it was; ``meta.retired`` names each such model with the newest release
that listed it. ``--recover-from VERSION`` brings back the models that releases since VERSION
listed and the new one lacks, each from the newest release that still listed it (every 16th
release is read, then the last one listing a model is found by bisection; a model is taken to
leave the table once).

    python scripts/refresh_prices.py                 # the newest litellm
    python scripts/refresh_prices.py --version 1.110.2
    python scripts/refresh_prices.py --wheel litellm-1.110.2-...whl --date 2026-11-28
    python scripts/refresh_prices.py --version 1.110.2 --date 2026-11-20 --recover-from 1.70.0
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "jsonltape" / "usage" / "prices.json"
MEMBER = "litellm/model_prices_and_context_window_backup.json"
MODES = {"chat", "responses", "completion"}
#: The members kept (LiteLLM's names): each of these, and its ``_above_<N>k_tokens`` tiers.
RATES = (
    "input_cost_per_token",
    "output_cost_per_token",
    "output_cost_per_reasoning_token",
    "cache_creation_input_token_cost",
    "cache_creation_input_token_cost_above_1hr",
    "cache_read_input_token_cost",
)
_TIERED = re.compile(r"^(?P<base>[a-z_0-9]+?)_above_(?P<k>\d+)k_tokens$")


def _kept(name: str) -> bool:
    if name in RATES:
        return True
    m = _TIERED.match(name)
    return m is not None and m.group("base") in RATES


def vendor(table: dict[str, object]) -> dict[str, dict[str, object]]:
    """The entries and members ``jsonltape usage`` reads, from LiteLLM's whole table."""
    out: dict[str, dict[str, object]] = {}
    for model, entry in sorted(table.items()):
        if not isinstance(entry, dict) or entry.get("mode") not in MODES:
            continue
        if "input_cost_per_token" not in entry or "output_cost_per_token" not in entry:
            continue
        kept: dict[str, object] = {k: v for k, v in sorted(entry.items()) if _kept(k)}
        extra = entry.get("provider_specific_entry")
        if isinstance(extra, dict) and isinstance(extra.get("fast"), (int, float)):
            kept["provider_specific_entry"] = {"fast": extra["fast"]}
        out[model] = kept
    return out


Models = dict[str, dict[str, object]]


def carry(
    new: Models, old: Mapping[str, Any] | None, old_version: str | None
) -> tuple[Models, dict[str, str]]:
    """``new`` with every model of the previous table (``old``: its ``models`` and
    ``meta.retired``) that ``new`` lacks, and the release each kept model was last listed in."""
    models, retired = dict(new), {}
    if not old:
        return models, retired
    before = old.get("meta", {}).get("retired", {}) if isinstance(old.get("meta"), dict) else {}
    for model, entry in sorted(old.get("models", {}).items()):
        if model not in new and isinstance(entry, dict):
            models[model] = entry
            retired[model] = str(before.get(model) or old_version)
    return models, retired


def recover(
    new: Models,
    versions: list[str],
    listed_in: Callable[[str], Models],
    step: int = 16,
) -> tuple[Models, dict[str, str]]:
    """The models of ``versions`` (releases older than ``new``'s, oldest first) that ``new``
    lacks, each as the newest of them that lists it has it.

    Every ``step``-th release (and the last) is read; a model one of them lists is then
    followed by bisection to the last release that lists it, between the last sample that does
    and the next. A model is taken to leave the table once; one listed for fewer than ``step``
    releases between two samples may be missed."""
    sampled = sorted({*range(0, len(versions), step), len(versions) - 1})
    seen: dict[str, int] = {}  # model -> the last sampled index that lists it
    for i in sampled:
        for model in listed_in(versions[i]):
            if model not in new:
                seen[model] = i
    found: Models = {}
    last: dict[str, str] = {}
    for model, lo in sorted(seen.items()):
        later = [i for i in sampled if i > lo]
        hi = later[0] - 1 if later else lo  # the next sample does not list it
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if model in listed_in(versions[mid]):
                lo = mid
            else:
                hi = mid - 1
        found[model] = listed_in(versions[lo])[model]
        last[model] = versions[lo]
    return found, last


def _releases(since: str, before: str) -> list[str]:
    """litellm's releases on PyPI from ``since`` up to (not including) ``before``, oldest
    first (final releases only)."""
    req = urllib.request.Request(
        "https://pypi.org/simple/litellm/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        listed = json.load(r)["versions"]

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.split("."))

    finals = [v for v in listed if re.fullmatch(r"\d+(\.\d+)*", v)]
    return sorted((v for v in finals if key(since) <= key(v) < key(before)), key=key)


def _wheel_table(version: str, tmp: str) -> tuple[dict[str, object], bool]:
    """LiteLLM's whole table in release ``version``, and whether that release is MIT."""
    subprocess.run(
        [sys.executable, "-P", "-m", "pip", "download", "-q", f"litellm=={version}",
         "--no-deps", "-d", tmp],
        check=True,
        cwd=tmp,
    )  # fmt: skip
    wheel = next(Path(tmp).glob(f"litellm-{version}-*.whl"))
    return _read_wheel(wheel)


def _read_wheel(wheel: Path) -> tuple[dict[str, object], bool]:
    with zipfile.ZipFile(wheel) as z:
        table = json.loads(z.read(MEMBER))
        # .dist-info/licenses/LICENSE since wheel metadata 2.4, .dist-info/LICENSE before
        licence = next(
            (n for n in z.namelist() if ".dist-info/" in n and n.endswith("LICENSE")), None
        )
        return table, licence is not None and b"MIT License" in z.read(licence)


def _upload_date(version: str) -> str:
    """The day PyPI received the version's first file (its simple index, PEP 691 JSON)."""
    req = urllib.request.Request(
        "https://pypi.org/simple/litellm/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        files = json.load(r)["files"]
    times = [f["upload-time"] for f in files if f["filename"].startswith(f"litellm-{version}")]
    return str(min(times))[:10]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", help="the litellm version (default: the newest)")
    ap.add_argument("--wheel", type=Path, help="a litellm wheel already downloaded")
    ap.add_argument("--date", help="the wheel's release date, YYYY-MM-DD (default: from PyPI)")
    ap.add_argument(
        "--recover-from",
        metavar="VERSION",
        help="also keep the models releases since this one listed and the new one lacks",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel
        if wheel is None:
            spec = f"litellm=={args.version}" if args.version else "litellm"
            subprocess.run(
                [sys.executable, "-P", "-m", "pip", "download", spec, "--no-deps", "-d", tmp],
                check=True,
                cwd=tmp,
            )
            wheel = next(Path(tmp).glob("litellm-*.whl"))
        version = wheel.name.split("-")[1]
        table, mit = _read_wheel(wheel)
        if not mit:
            sys.exit(f"litellm {version}: its licence is no longer MIT; not vendored")
        new = vendor(table)
        old = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else None
        old_version = old["meta"].get("version") if old else None
        models, retired = carry(new, old, old_version)
        if args.recover_from:
            cache: dict[str, Models] = {}

            def listed_in(v: str) -> Models:
                if v not in cache:
                    with tempfile.TemporaryDirectory() as d:
                        whole, ok = _wheel_table(v, d)
                    if not ok:
                        sys.exit(f"litellm {v}: not MIT; nothing taken from it")
                    cache[v] = vendor(whole)
                    print(f"  litellm {v}: {len(cache[v])} models", file=sys.stderr)
                return cache[v]

            found, last = recover(models, _releases(args.recover_from, version), listed_in)
            models.update(found)
            retired.update(last)
    doc = {
        "meta": {
            "source": "LiteLLM model_prices_and_context_window_backup.json",
            "package": "litellm",
            "version": version,
            "date": args.date or _upload_date(version),
            "license": "MIT, Copyright (c) 2023 Berri AI",
            "url": "https://github.com/BerriAI/litellm",
            "models": len(models),
            "retired": dict(sorted(retired.items())),
        },
        "models": dict(sorted(models.items())),
    }
    text = json.dumps(doc, separators=(",", ":"), sort_keys=False, ensure_ascii=False)
    OUT.write_text(text + "\n", encoding="utf-8")
    print(
        f"{OUT.relative_to(ROOT)}: litellm {version}, {len(models)} models "
        f"({len(retired)} kept from earlier releases), {len(text)} bytes"
    )


if __name__ == "__main__":
    main()
