"""The unchanged re-import: one small read of each imported session's end decides it, and it
decides exactly what the scan of the session's tail decides, whatever that end holds.

``_state.last_sync`` reads an import's marker from the last bytes of a session when the session
ends as an import leaves it (the marker, then the checkpoint that closed it); any other end
goes to ``_state._scanned_marker`` (the tail scan every import used before). The differential
tests here compare the two on every cut, flipped bit and reordering of a session's end, and
the whole import with the fast read against the import with the scan alone.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape import _commit, _scan, reader, writer
from jsonltape.errors import FormatError
from jsonltape.interop import _state, import_file

from .conftest import SAMPLES

HOUR_AGO = time.time() - 7200
#: a Claude Code session with sidechains: three imported sessions, each ending with a marker
JAPANESE = "claude-code-v1.0.108-japanese.jsonl"


def _copy(name: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / name
    shutil.copyfile(SAMPLES / name, out)
    os.utime(out, (HOUR_AGO, HOUR_AGO))
    return out


def _outcome(fn: Callable[[Path], Any], path: Path) -> tuple[Any, ...]:
    try:
        return ("value", fn(path))
    except jsonltape.JsonltapeError as exc:
        return ("error", type(exc).__name__, str(exc))


def _imported(tmp_path: Path, name: str = JAPANESE) -> list[Path]:
    report = import_file("claude-code", _copy(name, tmp_path / "src"), tmp_path / "root")
    assert report.status == "imported", report.error
    assert len(report.sessions) > 1  # sidechains: every session's end is tried
    return [Path(s) for s in report.sessions]


def _ends(data: bytes) -> Iterator[tuple[str, bytes]]:
    """Every end of a session the fast read may meet: as the import left it, cut at every
    byte of its last three lines, a bit flipped in each byte of the marker and the checkpoint
    (what the fast read reads; damage further back is ``verify``'s to find: the scan sees it
    only where its bisection happens to start before it), the two lines before the checkpoint
    swapped (same length: the checkpoint's offset still matches), the checkpoint gone, a torn
    line after it."""
    lines = data.splitlines(keepends=True)
    start = len(data) - sum(len(x) for x in lines[-3:])
    yield "intact", data
    for cut in range(start, len(data)):
        yield f"cut at {cut}", data[:cut]
    for i in range(len(data) - len(lines[-1]) - len(lines[-2]), len(data)):
        for bit in (0x01, 0x20):
            flipped = bytearray(data)
            flipped[i] ^= bit
            yield f"bit {bit:#x} of byte {i}", bytes(flipped)
    yield "swapped", b"".join([*lines[:-3], lines[-2], lines[-3], lines[-1]])
    yield "no checkpoint", b"".join(lines[:-1])
    yield "torn line after the checkpoint", data + b'{"seq":'


def test_the_marker_read_from_the_end_is_the_tail_scans_for_every_cut_flip_and_reordering(
    tmp_path: Path,
) -> None:
    for session in _imported(tmp_path):
        data = session.read_bytes()
        assert _state.last_sync(session) == _state._scanned_marker(session) is not None
        probe = tmp_path / "probe.jsonl"
        decided = 0
        for what, end in _ends(data):
            probe.write_bytes(end)
            fd = os.open(probe, os.O_RDONLY)
            try:
                decided += _state._closed_marker(fd) is not None
            finally:
                os.close(fd)
            want = _outcome(_state._scanned_marker, probe)
            assert _outcome(_state.last_sync, probe) == want, f"{session.name}: {what}"
        assert decided == 1  # the intact end; every other one went to the scan


def test_a_marker_further_back_than_the_window_is_not_taken_from_the_end(tmp_path: Path) -> None:
    """Events appended after an import (by another writer): within the window the marker is
    still found, beyond it neither read finds one (and the import then maps the source)."""
    session = _imported(tmp_path)[0]
    for extra, found in ((2, True), (_state._WINDOW, False)):
        probe = tmp_path / f"extra{extra}.jsonl"
        shutil.copyfile(session, probe)
        with jsonltape.open(probe) as tape:
            for i in range(extra):
                tape.append("x/note", {"i": i}, ignorable=True)
        assert _state.last_sync(probe) == _state._scanned_marker(probe)
        assert (_state.last_sync(probe) is not None) is found


def _report(tmp_path: Path, image: bytes, name: str, *, fast: bool) -> tuple[Any, ...]:
    """Re-import the unchanged source into a copy of the root whose session ``name`` is
    ``image``, with the fast read or with the tail scan alone."""
    root = tmp_path / f"root-{len(list(tmp_path.iterdir()))}"
    shutil.copytree(tmp_path / "root", root)
    (root / "claude-code" / name).write_bytes(image)
    with pytest.MonkeyPatch.context() as mp:
        if not fast:
            mp.setattr(_state, "_closed_marker", lambda fd: None)
        # a marker and a checkpoint carry the writer's clock: one instant for both runs, so
        # their bytes compare (a marker the crash image lacks is written again)
        for module in (_commit, writer):
            mp.setattr(module, "now_ms", lambda: 1_800_000_000_000)
        r = import_file("claude-code", tmp_path / "src" / JAPANESE, root)
    sessions = [Path(s).relative_to(root) for s in r.sessions]
    files = {p.name: p.read_bytes() for p in sorted((root / "claude-code").iterdir())}
    return r.status, r.error and r.error.replace(str(root), "ROOT"), r.events, sessions, files


def test_an_import_over_any_end_of_its_sessions_does_what_the_scan_alone_does(
    tmp_path: Path,
) -> None:
    """Unchanged, crashed before its checkpoint, torn after it, damaged at its marker: the
    report and every byte written are the same with the fast read as with the scan."""
    sessions = _imported(tmp_path)
    main = sessions[0]
    data = main.read_bytes()
    lines = data.splitlines(keepends=True)
    marker_at = len(data) - len(lines[-1]) - len(lines[-2])
    images = {
        "intact": data,
        "no checkpoint": b"".join(lines[:-1]),
        "no marker": b"".join(lines[:-2]),
        "torn after": data + b'{"seq":',
        "marker flipped": data[: marker_at + 5] + b"X" + data[marker_at + 6 :],
    }
    for what, image in images.items():
        fast = _report(tmp_path, image, main.name, fast=True)
        assert fast == _report(tmp_path, image, main.name, fast=False), what
    assert _report(tmp_path, data, main.name, fast=True)[0] == "unchanged"


def test_an_unchanged_reimport_reads_a_few_kib_of_each_session_whatever_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cost bound, counted: the bytes read from the imported sessions while deciding
    that the 1 MB pi sample (2.5 MB imported) is unchanged."""
    src = _copy("pi-v1-legacy-large-session.jsonl", tmp_path / "src")
    first = import_file("pi", src, tmp_path / "root")
    assert first.status == "imported", first.error
    size = sum(Path(s).stat().st_size for s in first.sessions)
    assert size > 2_000_000
    real = os.pread
    read: list[int] = []

    def counting(fd: int, n: int, offset: int) -> bytes:
        out = real(fd, n, offset)
        read.append(len(out))
        return out

    monkeypatch.setattr(os, "pread", counting)
    again = import_file("pi", src, tmp_path / "root")
    assert again.status == "unchanged", again.error
    assert sum(read) <= 32 * 1024, (sum(read), len(read))  # was 4.6 MB in 12 reads
    assert len(read) == 2  # the header, the end


@pytest.mark.parametrize(
    "length", [_scan._HEADER_PROBE - 1, _scan._HEADER_PROBE, _scan._HEADER_PROBE + 1, 50_000]
)
def test_a_header_of_any_length_around_the_first_read_reads_whole(
    tmp_path: Path, length: int
) -> None:
    """The header is read with one small read when it fits, else scanned: a header line of
    any length around that read's size (with and without its newline) reads as it is."""
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True, session_id="s", meta={"pad": ""}) as tape:
        tape.append("x/note", {}, ignorable=True)
    data = path.read_bytes()
    pad = length - (data.index(b"\n") + 1)
    path.unlink()
    with jsonltape.open(path, create=True, session_id="s", meta={"pad": "p" * pad}) as tape:
        tape.append("x/note", {}, ignorable=True)
    data = path.read_bytes()
    assert data.index(b"\n") + 1 == length
    assert reader.header(path).meta == {"pad": "p" * pad}
    assert reader.verify(path).state == "clean"
    assert [e.type for e in reader.read(path)][:2] == ["session/start", "x/note"]
    path.write_bytes(data[: length - 1])  # the header cut before its newline
    with pytest.raises(FormatError, match="line 1: incomplete line"):
        reader.header(path)


def test_a_rewrite_keeping_size_and_mtime_is_unseen_until_the_source_changes_then_refused(
    tmp_path: Path,
) -> None:
    """What the spec promises (Appendix B): ``size`` and ``mtime_ns`` as the newest marker
    recorded them mean unchanged, so a same-size rewrite with its mtime put back writes
    nothing; once the source changes again, the rewritten prefix is refused, nothing written."""
    src = _copy("codex-0.104-rollout-complete.jsonl", tmp_path / "src")
    root = tmp_path / "root"
    report = import_file("codex", src, root)
    assert report.status == "imported", report.error
    path = Path(report.sessions[0])
    before = path.read_bytes()
    stat = src.stat()
    data = bytearray(src.read_bytes())
    i = data.index(b"REDACTED_TEXT len=156")
    data[i : i + 8] = b"rewritte"
    src.write_bytes(bytes(data))
    os.utime(src, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert import_file("codex", src, root).status == "unchanged"
    assert path.read_bytes() == before
    with open(src, "ab") as f:
        f.write(b'{"timestamp":"2026-02-23T19:40:00.000Z","type":"x","payload":{}}\n')
    again = import_file("codex", src, root)
    assert again.status == "error" and "changed since it was imported" in str(again.error)
    assert path.read_bytes() == before
