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

    python scripts/refresh_prices.py                 # the newest litellm
    python scripts/refresh_prices.py --version 1.110.2
    python scripts/refresh_prices.py --wheel litellm-1.110.2-...whl --date 2026-11-28
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
from pathlib import Path

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
        with zipfile.ZipFile(wheel) as z:
            table = json.loads(z.read(MEMBER))
            licence = next(n for n in z.namelist() if n.endswith("/licenses/LICENSE"))
            mit = b"MIT License" in z.read(licence)
    if not mit:
        sys.exit(f"litellm {version}: its licence is no longer MIT; not vendored")
    models = vendor(table)
    doc = {
        "meta": {
            "source": "LiteLLM model_prices_and_context_window_backup.json",
            "package": "litellm",
            "version": version,
            "date": args.date or _upload_date(version),
            "license": "MIT, Copyright (c) 2023 Berri AI",
            "url": "https://github.com/BerriAI/litellm",
            "models": len(models),
        },
        "models": models,
    }
    text = json.dumps(doc, separators=(",", ":"), sort_keys=False, ensure_ascii=False)
    OUT.write_text(text + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: litellm {version}, {len(models)} models, {len(text)} bytes")


if __name__ == "__main__":
    main()
