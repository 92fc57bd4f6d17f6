"""Secrets in events, for ``jsonltape redact`` and the commit guard: every member of a line, and
text that runs across lines (a stream's ``assistant/chunk`` events).

**A line.** Every member a reader may show is masked: ``data`` at any depth, the idempotency
``key``, members the envelope does not know (their names too), and the ``type`` (a secret there
becomes ``redacted``, so the type stays a valid name). Only the members that hold numbers and
structure are kept as they are: seq, time, surface, sources, ignorable (and crc, recomputed).

**Stream chunks.** The deltas of consecutive ``assistant/chunk`` events are what a reader sees as
one text (checkpoints between them do not break a run); each chunk's strings, in order, are the
pieces of that text. The run is scanned joined (in windows of 256 KiB that overlap by 8 KiB, so
a secret of up to 8 KiB split anywhere is found and memory stays bounded), each secret found is
reported once, and the copy masks it in every chunk it covers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from .._lines import Bad, problem_of, scan
from ._secret_mask import Masker, Path, Secret, kinds_in, where
from ._secret_scan import ANY, Span, find_pieces, spans

__all__ = ["CHUNK", "KEPT", "ChunkSecret", "Chunks", "mask_members", "pieces"]

CHUNK = "assistant/chunk"
#: Envelope members that hold numbers and structure only: never masked.
KEPT = frozenset({"seq", "time", "crc", "surface", "sources", "ignorable"})
_ENVELOPE = frozenset({*KEPT, "type", "data", "key"})
#: What a secret in an event type becomes (a type is lowercase letters, digits, ``._-/``).
TYPE_MASK = "redacted"
WINDOW = 256 << 10
OVERLAP = 8 << 10


def mask_members(members: dict[str, Any], masker: Masker) -> dict[str, Any]:
    """A line's members with every secret masked (see the module doc), in their order."""
    out: dict[str, Any] = {}
    for k, v in members.items():
        if k in KEPT:
            out[k] = v
        elif k == "type" and isinstance(v, str):
            out[k] = _mask_type(v, masker)
        else:
            name = k if k in _ENVELOPE else masker.text(k, ())
            out[name] = masker.value(v, (k,))
    return out


def _mask_type(value: str, masker: Masker) -> str:
    found = spans(value, ANY)
    if not found:
        return value
    out: list[str] = []
    last = 0
    for s in found:
        out += (value[last : s.start], TYPE_MASK)
        last = s.end
        if masker.found is not None:
            masker.found.append(Secret(s.rule.kind, value[s.start : s.end], "$.type"))
    out.append(value[last:])
    return "".join(out)


def pieces(value: Any, path: Path = ("data",)) -> Iterator[tuple[Path, str]]:
    """The strings of a chunk's ``data``, in order, with their paths (the text it adds)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list):
        for i, x in enumerate(value):
            yield from pieces(x, (*path, i))
    elif isinstance(value, dict):
        for k, x in value.items():
            yield from pieces(x, (*path, k))


class ChunkSecret(NamedTuple):
    """A secret of a run of chunks: the seqs of the chunks it covers, and the secret."""

    seqs: tuple[int, ...]
    secret: Secret


class _Piece(NamedTuple):
    at: int  #: where it starts in the run's text
    line: int  #: the offset of its line
    seq: int
    path: Path
    text: str


class Chunks:
    """Collects the runs of chunk events of a file, line by line in order, and finds the secrets
    of each run's joined text: :attr:`masks` (line offset -> path -> spans to mask) and
    :attr:`secrets` (each once, with the seqs it covers)."""

    def __init__(self) -> None:
        #: True once a chunk was added: each chunk's data is then judged only joined.
        self.active = False
        self.masks: dict[int, dict[Path, list[Span]]] = {}
        self.secrets: list[ChunkSecret] = []
        self._run: list[_Piece] = []
        self._size = 0  # the run's text so far
        self._scanned = 0  # where the part of the run not yet scanned starts
        self._seen: set[tuple[str, int]] = set()  # (kind, where in the run) reported

    def add(self, offset: int, seq: int, type_: str, data: Any) -> None:
        """The next line of the file: a chunk joins the run, a checkpoint leaves it as it is,
        any other event ends it."""
        if type_ == "session/flush":
            return
        if type_ != CHUNK:
            self.end()
            return
        self.active = True
        for path, text in pieces(data):
            if text:
                self._run.append(_Piece(self._size, offset, seq, path, text))
                self._size += len(text)
        if self._size - self._scanned >= WINDOW:
            self._scan()

    def end(self) -> None:
        """The run is over: scan what is left of it."""
        if self._run and self._size > self._scanned:
            self._scan()
        self._run, self._size, self._scanned = [], 0, 0
        self._seen.clear()

    def _scan(self) -> None:
        run = self._run
        found = find_pieces([p.text for p in run], kinds_in("".join(p.text for p in run)) or ())
        for secret in found.secrets:
            first = run[secret.pieces[0]]
            start = first.at + found.per_piece[secret.pieces[0]][0].start
            if (secret.kind, start) in self._seen:
                continue  # found again in the overlap of the next window
            self._seen.add((secret.kind, start))
            seqs = tuple(sorted({run[i].seq for i in secret.pieces}))
            at = f"seq {seqs[0]}" if len(seqs) == 1 else f"seqs {seqs[0]}-{seqs[-1]}"
            text = where(first.path) + (f" ({at})" if len(seqs) > 1 else "")
            self.secrets.append(ChunkSecret(seqs, Secret(secret.kind, secret.text, text)))
        for piece, per in zip(run, found.per_piece, strict=True):
            if per:
                spots = self.masks.setdefault(piece.line, {}).setdefault(piece.path, [])
                spots.extend(s for s in per if s not in spots)
        # Keep the pieces that end within the overlap: the next window starts with them.
        self._scanned = self._size
        keep = [p for p in run if p.at + len(p.text) > self._size - OVERLAP]
        self._run = keep


def chunks_after(fd: int, data: bytes, start: int, expected: int) -> Chunks | None:
    """The runs of chunks of the lines of ``data`` (the bytes in ``fd``) from ``start`` on (seq
    ``expected`` there), scanned joined, with the chunks before ``start`` that the first run
    continues (None when no line from ``start`` on can be a chunk: every chunk line holds
    ``chunk`` in its type, or a ``\\u`` escape)."""
    if data.find(b"chunk", start) < 0 and data.find(b"\\u", start) < 0:
        return None
    chunks = Chunks()
    for off, event in _run_before(data, start):
        chunks.add(off, event.seq, event.type, event.data)
    return scan_chunks(fd, start, expected, chunks)


def scan_chunks(fd: int, start: int, expected: int, chunks: Chunks) -> Chunks:
    """``chunks`` with every line of the file ``fd`` from ``start`` on (seq ``expected``
    there) added, up to its first bad line (whoever reads the lines says what is wrong)."""
    for item in scan(fd, start, expected):
        if isinstance(item, Bad):
            break
        off, _body, event = item
        chunks.add(off, event.seq, event.type, event.data)
    chunks.end()
    return chunks


def _run_before(data: bytes, start: int) -> list[tuple[int, Any]]:
    """The chunk (and checkpoint) lines just before ``start``, up to the run's start or what
    the overlap of a run's windows holds, in order."""
    out: list[tuple[int, Any]] = []
    size, end = 0, start
    while end > 0 and size < OVERLAP:
        begin = data.rfind(b"\n", 0, end - 1) + 1
        try:
            event, problem = problem_of(data[begin:end], None)
        except RecursionError:
            break
        if problem is not None or event is None or event.type not in (CHUNK, "session/flush"):
            break
        out.append((begin, event))
        size += sum(len(x) for x in event.data.values() if isinstance(x, str))
        end = begin
    return out[::-1]
