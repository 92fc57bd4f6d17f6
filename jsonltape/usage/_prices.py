"""The price table: per-token rates of each model, and what a response costs at them.

The package ships a table taken from LiteLLM's model price file (``prices.json``, written by
``scripts/refresh_prices.py``, with the LiteLLM version and date it came from); ``--prices
FILE`` reads another: LiteLLM's own file as it is, or one shaped like ours. Nothing is ever
fetched.

Rules (spec Appendix B.12):

* A model is looked up by its exact name, then without a ``provider/`` prefix. Nothing is
  guessed from a similar name: a model the table does not know is **unpriced** -- its tokens
  are reported as such, never priced at $0.
* A token category without a rate in the table (a cache write of a model with no cache-write
  rate) is unpriced too. Reasoning tokens are output tokens to every provider: they take the
  output rate unless the table gives them one of their own.
* Long-context rates: a request whose prompt (input + cache reads and writes) is above a
  threshold the table has (``input_cost_per_token_above_200k_tokens``...) pays every category
  at that tier's rate, as Anthropic, Google and OpenAI bill them; a category without a tier
  rate keeps its base rate.
* Fast mode (Claude Code's ``speed: "fast"``): the table's ``provider_specific_entry.fast``
  multiplier; a model without one is unpriced in fast mode.
* Rates are read exactly (the decimal the file wrote) and costs summed as integers in units
  of 10^-36 dollars (:data:`UNIT_PER_USD`: exact for every decimal rate a JSON table holds);
  reports round each figure once, to integer micro-dollars.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from .._fs import read_repo_file
from ..errors import FormatError, UnsafeFileError
from ._rules import THRESHOLDS, Tokens

__all__ = ["UNIT_PER_USD", "Cost", "ModelPrice", "PriceInfo", "PriceTable", "load_prices"]

SHIPPED = Path(__file__).with_name("prices.json")

#: The category of each rate member (LiteLLM's names), in the order of :class:`Tokens`.
_BASE = {
    "input_cost_per_token": "input",
    "output_cost_per_token": "output",
    "cache_creation_input_token_cost": "cache_5m",
    "cache_creation_input_token_cost_above_1hr": "cache_1h",
    "cache_read_input_token_cost": "cache_read",
    "output_cost_per_reasoning_token": "reasoning",
}
_TIERED = re.compile(r"^(?P<base>[a-z_0-9]+?)_above_(?P<k>\d+)k_tokens$")
_FIELDS = Tokens._fields


class PriceInfo(msgspec.Struct, frozen=True):
    """Where a table came from: printed with every report."""

    source: str
    version: str | None
    date: str | None
    path: str | None = None  #: a table given with ``--prices``


class ModelPrice(NamedTuple):
    """One model's rates (USD per token, exact): the base rates, each tier's, fast mode's."""

    base: tuple[Fraction | None, ...]  #: per category of :class:`Tokens`
    tiers: tuple[tuple[int, tuple[Fraction | None, ...]], ...]  #: (threshold, rates), ascending
    fast: Fraction | None  #: the fast-mode multiplier


#: Costs are counted in units of 10^-36 dollars: every rate a JSON price table writes (a
#: decimal of at most 17 significant digits, down to 10^-19 per token) and its fast-mode
#: multiple is a whole number of them, so sums are exact integer arithmetic.
UNIT_PER_USD = 10**36


def _units(x: Fraction) -> int:
    """``x`` units, rounded half up (exact for every rate a decimal table can hold)."""
    return int((x + Fraction(1, 2)).__floor__())


class Cost(NamedTuple):
    """What some tokens cost: ``units`` (of ``1 / UNIT_PER_USD`` dollars) for the priced ones,
    and how many tokens are unpriced."""

    units: int
    unpriced: int

    @property
    def usd(self) -> Fraction:
        return Fraction(self.units, UNIT_PER_USD)


def _rate(value: Any, where: str, path: str | None) -> Fraction:
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise FormatError(f"{where}: a price must be a number >= 0, not {value!r}", path=path)
    return Fraction(repr(value)) if type(value) is float else Fraction(value)


def _parse(model: str, entry: Any, path: str | None) -> ModelPrice:
    if not isinstance(entry, Mapping):
        raise FormatError(f"model {model!r}: not a JSON object", path=path)
    base: list[Fraction | None] = [None] * len(_FIELDS)
    tiers: dict[int, list[Fraction | None]] = {}
    for name, value in entry.items():
        cat = _BASE.get(name)
        if cat is not None:
            base[_FIELDS.index(cat)] = _rate(value, f"model {model!r}: {name}", path)
            continue
        m = _TIERED.match(name)
        if m is None or m.group("base") not in _BASE:
            continue  # other members (modes, limits, batch and priority rates) are not used
        threshold = int(m.group("k")) * 1000
        if threshold not in THRESHOLDS:
            raise FormatError(
                f"model {model!r}: {name}: a long-context threshold of {threshold:,} tokens is "
                f"not one the index groups requests by ({', '.join(f'{t:,}' for t in THRESHOLDS)})",
                path=path,
            )
        rates = tiers.setdefault(threshold, [None] * len(_FIELDS))
        rates[_FIELDS.index(_BASE[m.group("base")])] = _rate(
            value, f"model {model!r}: {name}", path
        )
    fast = None
    extra = entry.get("provider_specific_entry")
    if isinstance(extra, Mapping) and "fast" in extra:
        fast = _rate(extra["fast"], f"model {model!r}: provider_specific_entry.fast", path)
    return ModelPrice(tuple(base), tuple((t, tuple(r)) for t, r in sorted(tiers.items())), fast)


class PriceTable:
    """A price table: models by name, parsed when first looked up."""

    def __init__(self, models: Mapping[str, Any], info: PriceInfo) -> None:
        self.info = info
        self._raw = models
        self._parsed: dict[str, ModelPrice | None] = {}
        self._rates: dict[tuple[str, int, bool], tuple[int | None, ...] | None] = {}

    def __contains__(self, model: str) -> bool:
        return self.lookup(model) is not None

    def lookup(self, model: str) -> ModelPrice | None:
        """The rates of ``model``: its exact name, else its name after a ``provider/``."""
        if model in self._parsed:
            return self._parsed[model]
        name = model if model in self._raw else model.rpartition("/")[2]
        entry = self._raw.get(name) if name else None
        found = None if entry is None else _parse(name, entry, self.info.path)
        self._parsed[model] = found
        return found

    def check(self) -> None:
        """Parse every model (a table given with ``--prices`` is checked whole, at once)."""
        for model in self._raw:
            self.lookup(model)

    def rates(self, model: str, tier: int, fast: bool) -> tuple[int | None, ...] | None:
        """The rates a request of ``model`` pays per token, in units of :data:`UNIT` dollars,
        per category of :class:`Tokens` (None: no rate) once its prompt passed ``tier`` of
        :data:`THRESHOLDS`; None when the model is unpriced (in fast mode, too)."""
        key = (model, tier, fast)
        if key in self._rates:
            return self._rates[key]
        price = self.lookup(model)
        found: tuple[int | None, ...] | None = None
        if price is not None and not (fast and price.fast is None):
            rates = list(price.base)
            passed = THRESHOLDS[tier - 1] if tier > 0 else 0
            for threshold, tier_rates in price.tiers:
                if threshold <= passed:  # the prompt is above this threshold
                    rates = [
                        t if t is not None else b for t, b in zip(tier_rates, rates, strict=True)
                    ]
            reasoning = _FIELDS.index("reasoning")
            if rates[reasoning] is None:
                rates[reasoning] = rates[_FIELDS.index("output")]
            scale = UNIT_PER_USD * (price.fast if fast and price.fast is not None else 1)
            found = tuple(None if r is None else _units(r * scale) for r in rates)
        self._rates[key] = found
        return found

    def cost(self, model: str, tokens: Sequence[int], tier: int, fast: bool) -> Cost:
        """The cost of ``tokens`` (the six counts of :class:`Tokens`) of requests of ``model``
        whose prompts passed ``tier`` of :data:`THRESHOLDS` (see the module's rules)."""
        rates = self.rates(model, tier, fast)
        if rates is None:
            return Cost(0, sum(tokens))
        units, unpriced = 0, 0
        for n, rate in zip(tokens, rates, strict=True):
            if n:
                if rate is None:
                    unpriced += n
                else:
                    units += n * rate
        return Cost(units, unpriced)


_MAX_TABLE = 64 << 20


def load_prices(path: str | os.PathLike[str] | None = None) -> PriceTable:
    """The shipped table, or the one at ``path`` (LiteLLM's file, or one shaped like ours:
    ``{"meta": {...}, "models": {...}}``). A file that is not such a table is a
    :class:`~jsonltape.errors.FormatError` naming it."""
    file = SHIPPED if path is None else Path(path)
    shown = None if path is None else str(file)
    try:
        # a path given by the user is opened as any file jsonltape reads: no symlink followed,
        # no FIFO or device waited on, size capped (LiteLLM's table is ~1.5 MB)
        data = file.read_bytes() if path is None else read_repo_file(file, _MAX_TABLE)
        if data is None:
            raise FormatError("cannot read the price table: no such file", path=shown)
        doc = msgspec.json.decode(data)
    except UnsafeFileError as exc:
        raise FormatError(f"cannot read the price table: {exc.message}", path=shown) from None
    except msgspec.DecodeError as exc:
        raise FormatError(f"not a JSON price table: {exc}", path=shown) from None
    except OSError as exc:
        raise FormatError(
            f"cannot read the price table: {exc.strerror or exc}", path=shown
        ) from None
    if not isinstance(doc, dict):
        raise FormatError("a price table is a JSON object of models", path=shown)
    meta = doc.get("meta")
    if isinstance(meta, dict) and isinstance(doc.get("models"), dict):
        models: dict[str, Any] = doc["models"]
        version, date = meta.get("version"), meta.get("date")
        source = str(meta.get("source") or "price table")
    else:  # LiteLLM's own file: models at the top, and its "sample_spec" entry
        models = {k: v for k, v in doc.items() if k != "sample_spec"}
        version = None
        date = dt.datetime.fromtimestamp(file.stat().st_mtime, dt.timezone.utc).date().isoformat()
        source = "LiteLLM-shaped price table"
    table = PriceTable(
        models,
        PriceInfo(
            source=source,
            version=str(version) if version is not None else None,
            date=str(date) if date is not None else None,
            path=shown,
        ),
    )
    if path is not None:
        table.check()
    return table
