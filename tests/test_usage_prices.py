"""The price table and what a response costs at it (spec Appendix B.12): exact rates, long-context
tiers, cache rates, unpriced models and categories (never $0), fast mode, and tables that are
refused with one error naming what is wrong."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from jsonltape.errors import FormatError
from jsonltape.usage import THRESHOLDS, Tokens, load_prices
from jsonltape.usage._report import micros

from .helpers import load_script

TABLE = {
    "m": {
        "input_cost_per_token": 3e-06,
        "output_cost_per_token": 1.5e-05,
        "cache_creation_input_token_cost": 3.75e-06,
        "cache_creation_input_token_cost_above_1hr": 6e-06,
        "cache_read_input_token_cost": 3e-07,
        "input_cost_per_token_above_200k_tokens": 6e-06,
        "output_cost_per_token_above_200k_tokens": 2.25e-05,
        "cache_read_input_token_cost_above_272k_tokens": 6e-07,
        "mode": "chat",
    },
    "bare": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06},
    "thinker": {
        "input_cost_per_token": 1e-06,
        "output_cost_per_token": 2e-06,
        "output_cost_per_reasoning_token": 5e-06,
    },
    "quick": {
        "input_cost_per_token": 5e-06,
        "output_cost_per_token": 2.5e-05,
        "provider_specific_entry": {"fast": 6},
    },
}


def _table(tmp_path: Path, doc: object = TABLE, name: str = "prices.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _tier(prompt: int) -> int:
    return sum(1 for t in THRESHOLDS if prompt > t)


def test_every_category_is_priced_at_its_exact_rate(tmp_path: Path) -> None:
    table = load_prices(_table(tmp_path))
    t = Tokens(input=1000, output=100, cache_5m=10, cache_1h=20, cache_read=1000)
    cost = table.cost("m", t, _tier(t.prompt), False)
    want = (
        1000 * Fraction(3, 10**6)
        + 100 * Fraction(15, 10**6)
        + 10 * Fraction(375, 10**8)
        + 20 * Fraction(6, 10**6)
        + 1000 * Fraction(3, 10**7)
    )
    assert (cost.usd, cost.unpriced) == (want, 0)
    assert micros(cost.units) == 4958  # 4957.5 micro-dollars, rounded half up
    assert micros(cost.units - 1) == 4957


def test_a_prompt_above_a_threshold_pays_every_category_at_that_tier(tmp_path: Path) -> None:
    """Anthropic, Google and OpenAI bill the whole request at the long-context rates once its
    prompt (input and cache) passes the threshold; a category without a tier rate keeps its
    rate. Not ccusage's rule, which splits each category's own count at 200k."""
    table = load_prices(_table(tmp_path))
    at = Tokens(input=200_000 - 1000, cache_read=1000, output=10)  # prompt == 200k: not above
    assert table.cost("m", at, _tier(at.prompt), False).usd == (
        199_000 * Fraction(3, 10**6) + 1000 * Fraction(3, 10**7) + 10 * Fraction(15, 10**6)
    )
    above = Tokens(input=1000, cache_read=200_000, output=10)  # 201k: every rate of the tier
    assert table.cost("m", above, _tier(above.prompt), False).usd == (
        1000 * Fraction(6, 10**6) + 200_000 * Fraction(3, 10**7) + 10 * Fraction(225, 10**7)
    )
    far = Tokens(input=1000, cache_read=300_000)  # past 272k too: the higher tier's cache read
    assert table.cost("m", far, _tier(far.prompt), False).usd == (
        1000 * Fraction(6, 10**6) + 300_000 * Fraction(6, 10**7)
    )


def test_an_unknown_model_is_unpriced_never_zero(tmp_path: Path) -> None:
    table = load_prices(_table(tmp_path))
    t = Tokens(input=5, output=7)
    assert table.cost("no-such-model", t, 0, False) == (0, 12)
    assert table.cost("m-2025", t, 0, False) == (0, 12)  # no guessing from a similar name
    assert table.rates("no-such-model", 0, False) is None
    assert table.lookup("anthropic/m") == table.lookup("m")  # a provider prefix is dropped
    assert "no-such-model" not in table


def test_a_category_without_a_rate_is_unpriced_and_reasoning_is_output(tmp_path: Path) -> None:
    table = load_prices(_table(tmp_path))
    t = Tokens(input=10, output=10, cache_5m=3, cache_1h=4, cache_read=5, reasoning=6)
    cost = table.cost("bare", t, 0, False)
    assert cost.unpriced == 3 + 4 + 5  # no cache rates in the table: not guessed from input
    assert cost.usd == 10 * Fraction(1, 10**6) + (10 + 6) * Fraction(2, 10**6)
    own = table.cost("thinker", Tokens(reasoning=6), 0, False)
    assert own.usd == 6 * Fraction(5, 10**6)


def test_fast_mode_uses_the_tables_multiplier_or_is_unpriced(tmp_path: Path) -> None:
    table = load_prices(_table(tmp_path))
    t = Tokens(input=10, output=10)
    assert table.cost("quick", t, 0, True).usd == 6 * table.cost("quick", t, 0, False).usd
    assert table.cost("bare", t, 0, True) == (0, 20)


def test_the_shipped_table_says_where_it_came_from_and_parses_whole() -> None:
    table = load_prices()
    info = table.info
    assert info.source.startswith("LiteLLM") and info.version and info.date and info.path is None
    doc = json.loads(Path(__file__).parents[1].joinpath("jsonltape/usage/prices.json").read_text())
    assert doc["meta"]["license"].startswith("MIT")
    assert doc["meta"]["models"] == len(doc["models"]) > 1000
    table.check()  # every entry parses, every threshold is one the index groups by
    sonnet = table.lookup("claude-sonnet-4-5")
    assert sonnet is not None and sonnet.base[0] == Fraction(3, 10**6)


def _refresh() -> Any:
    return load_script(Path(__file__).parents[1] / "scripts" / "refresh_prices.py", "refresh")


def test_a_price_once_shipped_is_kept_when_litellm_drops_the_model() -> None:
    refresh = _refresh()
    old = {
        "meta": {"version": "1.2", "retired": {"ancient": "1.0"}},
        "models": {"gone": {"input_cost_per_token": 1}, "ancient": {"input_cost_per_token": 2},
                   "kept": {"input_cost_per_token": 3}},
    }  # fmt: skip
    new = {"kept": {"input_cost_per_token": 4}, "fresh": {"input_cost_per_token": 5}}
    models, retired = refresh.carry(new, old, "1.2")
    # the new release's rate wins where it has the model; a dropped one keeps its last rate,
    # and where it was last listed (a model kept since an older refresh keeps that release)
    assert models == {**new, "gone": {"input_cost_per_token": 1},
                      "ancient": {"input_cost_per_token": 2}}  # fmt: skip
    assert retired == {"gone": "1.2", "ancient": "1.0"}
    assert refresh.carry(new, None, None) == (new, {})


def test_a_recovered_model_comes_from_the_newest_release_that_listed_it() -> None:
    refresh = _refresh()
    versions = [f"1.{n}" for n in range(40)]

    # "a" left after 1.17, "b" after 1.0, "c" is listed throughout, "d" came later and left,
    # "e" was listed by none of the releases read (1.0, 1.16, 1.32, 1.39) and is missed
    def listed_in(v: str) -> dict[str, dict[str, object]]:
        n = int(v.split(".")[1])
        out: dict[str, dict[str, object]] = {"c": {"r": n}}
        if n <= 17:
            out["a"] = {"r": n}
        if n == 0:
            out["b"] = {"r": n}
        if 14 <= n <= 33:
            out["d"] = {"r": n}
        if 3 <= n <= 9:
            out["e"] = {"r": n}
        return out

    asked: list[str] = []

    def counted(v: str) -> dict[str, dict[str, object]]:
        asked.append(v)
        return listed_in(v)

    found, last = refresh.recover({"c": {"r": 99}}, versions, counted)
    assert found == {"a": {"r": 17}, "b": {"r": 0}, "d": {"r": 33}}
    assert last == {"a": "1.17", "b": "1.0", "d": "1.33"}
    assert len(set(asked)) < 16  # samples and bisections, not a walk of every release


def test_the_shipped_table_prices_the_claude_models_anthropic_retired() -> None:
    table = load_prices()
    doc = json.loads(Path(__file__).parents[1].joinpath("jsonltape/usage/prices.json").read_text())
    for model, rates in {
        "claude-sonnet-4-20250514": (3, 15),
        "claude-opus-4-20250514": (15, 75),
        "claude-3-5-sonnet-20241022": (3, 15),
        "claude-3-7-sonnet-20250219": (3, 15),
    }.items():
        price = table.lookup(model)
        assert price is not None, model
        assert (price.base[0], price.base[1]) == tuple(Fraction(r, 10**6) for r in rates)
        assert model in doc["meta"]["retired"]  # and the release it was last listed in is said


def test_a_litellm_file_is_read_as_it_is(tmp_path: Path) -> None:
    doc = {"sample_spec": {"input_cost_per_token": "not a number"}, **TABLE}
    table = load_prices(_table(tmp_path, doc, "model_prices_and_context_window.json"))
    assert table.info.source == "LiteLLM-shaped price table"
    assert table.info.path == str(tmp_path / "model_prices_and_context_window.json")
    assert table.info.date is not None and table.lookup("m") is not None


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ("{not json", "not a JSON price table"),
        ([1, 2], "a JSON object of models"),
        ({"m": {"input_cost_per_token": -1}}, "model 'm': input_cost_per_token: a price must be"),
        ({"m": {"output_cost_per_token": "3"}}, "a price must be a number"),
        ({"m": {"output_cost_per_token": True}}, "a price must be a number"),
        ({"m": []}, "model 'm': not a JSON object"),
        (
            {"m": {"input_cost_per_token_above_300k_tokens": 1e-06}},
            "a long-context threshold of 300,000 tokens is not one the index groups",
        ),
    ],
)
def test_a_bad_table_is_refused_naming_the_file_and_what(
    tmp_path: Path, doc: object, says: str
) -> None:
    path = tmp_path / "p.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    with pytest.raises(FormatError) as info:
        load_prices(path)
    assert says in str(info.value) and str(path) in str(info.value)


def test_a_missing_table_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="cannot read the price table"):
        load_prices(tmp_path / "nope.json")
