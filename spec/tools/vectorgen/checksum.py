"""checksum/: the CRC-32 of §5 over raw bytes (the ``checksum`` command)."""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable

from .common import crc_hex, spec_block
from .expect import Built
from .registry import register


def _leading_zeros() -> bytes:
    """The first ``jsonltape N`` whose CRC is below 0x00100000 (five leading zero digits)."""
    i = 0
    while zlib.crc32(f"jsonltape {i}".encode()) >= 0x00100000:
        i += 1
    return f"jsonltape {i}".encode()


def _worked_example() -> bytes:
    line = spec_block("Worked example:").strip().encode()
    return line[: -len(',"crc":"6ddf222e"}')]


#: (name, extension, what it checks, the input bytes, the CRC the case pins or None).
CASES: tuple[tuple[str, str, str, Callable[[], bytes], str | None], ...] = (
    (
        "check_value",
        "txt",
        'The CRC-32 check value: the nine ASCII bytes "123456789".',
        lambda: b"123456789",
        "cbf43926",
    ),
    ("empty", "bin", "No bytes at all: CRC 00000000.", lambda: b"", None),
    ("one_zero_byte", "bin", "A single 0x00 byte.", lambda: b"\x00", None),
    (
        "four_ff_bytes",
        "bin",
        "Four 0xFF bytes: CRC ffffffff (all-ones output).",
        lambda: b"\xff" * 4,
        None,
    ),
    (
        "all_byte_values",
        "bin",
        "The 256 byte values 0x00..0xFF in order.",
        lambda: bytes(range(256)),
        None,
    ),
    (
        "leading_zeros",
        "txt",
        "Text whose CRC starts with zeros: the hex is zero-padded.",
        _leading_zeros,
        None,
    ),
    (
        "newlines_crlf",
        "bin",
        "CR and LF bytes: input is bytes, never newline-translated.",
        lambda: b"a\r\nb\nc\rd\r\n",
        None,
    ),
    (
        "invalid_utf8",
        "bin",
        "Bytes that are not UTF-8: the CRC is over bytes, not text.",
        lambda: b"\xc3\x28\xa0\xa1\xff\xfe\xed\xa0\x80",
        None,
    ),
    (
        "utf8_cjk",
        "txt",
        "UTF-8 text with CJK, accents and an emoji (multi-byte sequences).",
        lambda: "日本語のテキスト, café, 😀\n".encode(),
        None,
    ),
    (
        "spec_worked_example",
        "txt",
        "The checked bytes of the worked example in the spec (§5): CRC 6ddf222e.",
        _worked_example,
        "6ddf222e",
    ),
    (
        "random_4096",
        "bin",
        "4096 pseudo-random bytes (seed 4096).",
        lambda: random.Random(4096).randbytes(4096),
        None,
    ),
    (
        "zeros_4096",
        "bin",
        "4096 zero bytes (what a crash can leave at the end of a file).",
        lambda: bytes(4096),
        None,
    ),
)


def _builder(data: Callable[[], bytes], pinned: str | None) -> Callable[[], Built]:
    def build() -> Built:
        raw = data()
        crc = crc_hex(raw)
        assert pinned is None or crc == pinned, (crc, pinned)
        return raw, {"checksum": {"crc": crc}}

    return build


for _name, _ext, _doc, _data, _pinned in CASES:
    register("checksum", _name, _doc, _builder(_data, _pinned), _ext)
