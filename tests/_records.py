"""Building merge records by hand, as a collaborator who writes lines on purpose would: branch
records, well-formed or not, and checkpoints after them. Written with zlib and json only,
apart from the one framing helper."""

from __future__ import annotations

import json
import zlib
from typing import Any

from jsonltape import _framing


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def frame(obj: dict[str, Any]) -> bytes:
    """The line of ``obj`` (no crc member) with its crc suffix, without the newline."""
    return _framing.frame(dumps(obj))[:-1]


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


def malformed_record(data: bytes) -> bytes:
    """``data`` plus a well-framed ``branch/event`` without ``origin`` (recording the line
    after the header) and a checkpoint: damage before a witness."""
    seq, time = last(data)
    good = record_line(seq + 1, time, 0, data.splitlines()[1])
    body = good[:-18] + b"}"  # the object without its crc member
    body = body[: body.index(b',"origin"')] + body[body.index(b',"line"') :]
    return with_checkpoint(data, [_framing.frame(body)[:-1]])
