"""Building merge records by hand, as a collaborator who writes lines on purpose would: lines
with a chosen seq and CRC-32 (forged collisions), branch records around them, and checkpoints
after them. Written with zlib, hashlib and json only, apart from the one framing helper."""

from __future__ import annotations

import hashlib
import json
import zlib
from collections import Counter
from typing import Any

from jsonltape import _framing

BOOKKEEPING = ("session/flush", "branch/start")


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def frame(obj: dict[str, Any]) -> bytes:
    """The line of ``obj`` (no crc member) with its crc suffix, without the newline."""
    return _framing.frame(dumps(obj))[:-1]


def collide(prefix: bytes, suffix: bytes, target: int, width: int = 64) -> bytes:
    """``prefix + F + suffix`` whose CRC-32 is ``target``, F being ``width`` letters ``a``/``b``
    (safe inside a JSON string). CRC-32 is affine in the message bits, so the letters to flip
    are found by solving a linear system over GF(2): anyone can do this in microseconds."""
    base = bytearray(prefix + b"a" * width + suffix)
    c0 = zlib.crc32(base)
    basis: dict[int, tuple[int, int]] = {}  # top bit -> (crc difference, positions flipped)
    for i in range(width):
        flipped = bytearray(base)
        flipped[len(prefix) + i] ^= 0x03  # "a" <-> "b"
        vec, mask = zlib.crc32(flipped) ^ c0, 1 << i
        for bit in range(31, -1, -1):
            if vec >> bit & 1 and bit in basis:
                vec ^= basis[bit][0]
                mask ^= basis[bit][1]
        if vec:
            basis[vec.bit_length() - 1] = (vec, mask)
    want, mask = target ^ c0, 0
    for bit in range(31, -1, -1):
        if want >> bit & 1:
            vec, m = basis[bit]  # 64 random vectors span the 32 bits (else: a wider F)
            want ^= vec
            mask ^= m
    for i in range(width):
        if mask >> i & 1:
            base[len(prefix) + i] ^= 0x03
    assert zlib.crc32(base) == target
    return bytes(base)


def forged_line(seq: int, time: int, crc: str, text: str) -> bytes:
    """A good ``user/message`` line (without its newline) with ``seq`` and crc member ``crc``
    but the text ``text``: another line's name, other bytes."""
    msg = {"id": f"forged-{seq}", "role": "user", "parts": [{"type": "text", "content": text}]}
    head = dumps({"seq": seq, "type": "user/message", "time": time, "data": {"message": msg}})
    prefix = head[:-2] + b',"x-pad":"'  # inside data, after the message
    body = collide(prefix, b'"},"surface":"append"', int(crc, 16))
    return body + b',"crc":"' + crc.encode() + b'"}'


def receipt_line(seq: int, time: int, at: int, theirs: list[bytes], count: int) -> bytes:
    """A good ``branch/start`` at ``seq`` naming the lines ``theirs`` (seqs ``at+1`` on)."""
    crcs = [line[-10:-2].decode() for line in theirs]
    data = {
        "at": at,
        "head": at + len(theirs),
        "crc": crcs[-1],
        "lines": crcs,
        "count": count,
        "sha256": [hashlib.sha256(line).hexdigest() for line in theirs],
    }
    obj = {"seq": seq, "type": "branch/start", "time": time, "data": data, "ignorable": True}
    return frame(obj)


def record_line(seq: int, time: int, branch: int, line: bytes, origin: Any = None) -> bytes:
    """A ``branch/event`` at ``seq`` recording ``line`` verbatim (its origin by default)."""
    if origin is None:
        origin = {"seq": json.loads(line)["seq"], "crc": line[-10:-2].decode()}
    data = b'{"branch":%d,"origin":%s,"line":%s}' % (branch, dumps(origin), line)
    head = b'{"seq":%d,"type":"branch/event","time":%d,"data":' % (seq, time)
    return _framing.frame(head + data + b',"ignorable":true}')[:-1]


def last(data: bytes) -> tuple[int, int]:
    """(seq, time) of the last line of ``data``."""
    obj = json.loads(data.splitlines()[-1])
    return int(obj["seq"]), int(obj["time"])


def with_checkpoint(data: bytes, lines: list[bytes]) -> bytes:
    """``data`` plus ``lines`` (framed, without newlines, seqs continuing ``data``'s) and a
    checkpoint with its span, as a writer appends them."""
    flush = data.rfind(b'"type":"session/flush"')
    span_from = data.find(b"\n", flush) + 1 if flush >= 0 else data.find(b"\n") + 1
    body = data + b"".join(line + b"\n" for line in lines)
    seq, time = last(body)
    span = {"from": span_from, "crc": f"{zlib.crc32(body[span_from:]):08x}"}
    ck = {"offset": len(body), "seq": seq, "span": span}
    obj = {"seq": seq + 1, "type": "session/flush", "time": time, "data": ck, "ignorable": True}
    return body + frame(obj) + b"\n"


def forge_record(data: bytes, victim: bytes, text: str = "FORGED") -> bytes:
    """``data`` plus what a collaborator commits to suppress ``victim`` (a line he saw
    elsewhere, without its newline): a receipt and a well-formed ``branch/event`` whose line
    has the victim's seq and crc but the text ``text``, then a checkpoint."""
    seq, time = last(data)
    v = json.loads(victim)
    fake = forged_line(v["seq"], v["time"], victim[-10:-2].decode(), text)
    receipt = receipt_line(seq + 1, time, seq, [fake], 1)  # names any version: his
    return with_checkpoint(data, [receipt, record_line(seq + 2, time, seq + 1, fake)])


def malformed_record(data: bytes) -> bytes:
    """``data`` plus a well-framed ``branch/event`` without ``origin`` (recording the line
    after the header) and a checkpoint: damage before a witness."""
    seq, time = last(data)
    good = record_line(seq + 1, time, 0, data.splitlines()[1])
    body = good[:-18] + b"}"  # the object without its crc member
    body = body[: body.index(b',"origin"')] + body[body.index(b',"line"') :]
    return with_checkpoint(data, [_framing.frame(body)[:-1]])


def held_lines(data: bytes) -> Counter[bytes]:
    """Every line ``data`` holds, by its bytes (a branch/event: the line it records), with how
    often; bookkeeping left out."""
    from jsonltape._records import recorded

    out: Counter[bytes] = Counter()
    for line in data.splitlines():
        t = json.loads(line)["type"]
        if t in BOOKKEEPING:
            continue
        out[recorded(line).line if t == "branch/event" else line] += 1
    return out
