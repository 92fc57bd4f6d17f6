r"""The source lines an imported event keeps verbatim (``data.import.raw``, spec Appendix B.1).

A key is a line number ``N`` with that line's text, or a run of consecutive lines ``N-M``
(``N < M``) with their texts joined by ``\n``: a line's text never holds one, so the run splits
back into exactly its lines. Consecutive lines one event keeps are always one run (:func:`runs`),
however the importer took them (one by one, or many at once). A reply of a hundred lines is
then one string, not a hundred, for the importer, the encoder, the lossless gate's decoder and
every reader of the session; the source still rebuilds byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from .._limits import MAX_INT

__all__ = ["kept_lines", "run_of", "runs"]

#: ``N`` or ``N-M``: ASCII digits only (``str.isdigit`` also takes ``²``, which ``int`` refuses),
#: at most 16 (a line number is at most MAX_INT; ``int`` refuses more than 4,300 digits).
_KEY = re.compile(r"([1-9][0-9]{0,15})(?:-([1-9][0-9]{0,15}))?", re.ASCII)


def _key(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def run_of(first: int, texts: Sequence[str]) -> tuple[str, str]:
    """The key and value keeping ``texts``, lines ``first``, ``first + 1``, ... (at least one)."""
    return _key(first, first + len(texts) - 1), "\n".join(texts)


def runs(raw: dict[str, str]) -> dict[str, str]:
    """``raw`` (keys as :func:`run_of` makes them, lines in order) with consecutive lines as one
    run: lines ``5``, ``6-9`` and ``10`` are ``5-10``. A line whose text holds a ``\n`` (no
    importer's does) stays a key of its own: a run splits at each one."""
    out: dict[str, str] = {}
    first = last = 0
    texts: list[str] = []
    grows = False  # the run in ``texts`` may take the next line
    for key, text in raw.items():
        lo, _, hi = key.partition("-")
        n = int(lo)
        whole = bool(hi) or "\n" not in text
        if grows and whole and n == last + 1:
            texts.append(text)
        else:
            if texts:
                out[_key(first, last)] = "\n".join(texts)
            first, texts = n, [text]
        last, grows = (int(hi) if hi else n), whole
    if texts:
        out[_key(first, last)] = "\n".join(texts)
    return out


def kept_lines(raw: object) -> Iterator[tuple[int, str]]:
    """(line number, verbatim text) of every line ``raw`` keeps, in its order. What is not a
    line (1 to MAX_INT, in ASCII digits) or a run that splits into its lines (a session edited
    by hand) keeps nothing, and never raises: what an import continues from is checked against
    its ``import/sync`` hash anyway."""
    if not isinstance(raw, dict):
        return
    for key, text in raw.items():
        m = _KEY.fullmatch(key) if isinstance(key, str) else None
        if m is None or not isinstance(text, str):
            continue
        first = int(m.group(1))
        last = first if m.group(2) is None else int(m.group(2))
        if last > MAX_INT:
            continue
        if m.group(2) is None:
            yield first, text
        elif first < last and text.count("\n") == last - first:
            yield from enumerate(text.split("\n"), first)
