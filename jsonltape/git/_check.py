"""The commit guard (``jsonltape git pre-commit``, ``jsonltape git check PATH...``).

For each session file a commit would record, the guard reads the **staged blob** (never the work
tree) and reports one :class:`Problem` per thing it refuses:

* ``not-a-session``: a file marked as a session whose first line is not a jsonltape header;
* ``corrupt``: a bad line with a good checkpoint after it (spec §10.2: not a crash tail);
* ``torn``: a bad last line or lines (a writer may be mid-write, or the file was copied
  mid-write): wait for the writer to close, or run ``jsonltape repair``;
* ``secret``: a secret the rules of :mod:`jsonltape.interop._secret_rules` find in any member of
  any line (:mod:`jsonltape.interop._secret_events`: data at any depth, the key, the type,
  members the envelope does not know), as written or as a reader sees it, in a message's parts
  joined or in a run of stream chunks joined (with the chunks of HEAD's lines that the run
  continues), named by its rule, line, seq, a fingerprint and where it is (never by any part of
  the text): ``jsonltape redact SRC -o DST`` writes a masked copy;
* ``rewritten``: a history that is not an extension of HEAD's version of the file (or of the
  file it was renamed from): the first byte that differs, with its line and seq. A HEAD version
  whose torn tail was cut by ``repair`` is no rewrite: only HEAD's good lines must be kept.

Session files are the staged paths (``git diff --cached``: added, copied, modified, renamed)
whose ``merge`` or ``diff`` attribute is ``jsonltape``, and any other staged ``*.jsonl`` whose
first line is a jsonltape header. The staged blobs come through one
``git cat-file --batch`` process.

**Incremental.** When the staged blob starts with HEAD's blob and HEAD's ends with a whole line,
only the appended bytes are checked (lines, seq continuing after HEAD's last line, secrets):
what HEAD holds was checked when it was committed (or is in the history already). That the
staged blob starts with HEAD's is proved by HEAD's blob id (the hash of the staged blob's
first bytes, as many as HEAD's size): HEAD's blob itself is read only when it is not so.

**Accepting a secret.** ``--allow-secrets`` accepts every secret for one run. A known false
positive is accepted by its fingerprint, ``<rule>:<12 hex>`` (SHA-256 of the rule's id and
the secret, printed in the refusal), listed either in ``.jsonltape-allow`` at the top of the
work tree (one per line; ``#`` starts a comment; a symlink, a FIFO, a directory or a file over
4 MiB there is refused, never followed or read without end) or in ``git config --add
jsonltape.allowSecret <fingerprint>``.

Only the bytes of a file are judged; the screen that keeps the secret scan cheap is
:func:`jsonltape.interop._secret_screen.screen`. A session file without the ``merge=jsonltape``
attribute gets one note a run (``no-merge-attribute``, :data:`NOTES`: said, refuses nothing).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from .._fs import read_repo_file
from .._lines import Bad, problem_of, scan
from .._scan import read_header, witness_after
from ..errors import FormatError, GitError
from ..interop._redact_copy import Secret, fingerprint, may_hold_secret, screen
from ..interop._secret_events import CHUNK, Chunks, chunks_after, mask_members
from ..interop._secret_mask import Masker
from ..interop._secret_mask import Path as MemberPath
from ..interop._secret_scan import Span
from ._attrs import looks_like_session, session_attrs, unmarked_note
from ._objects import (
    SKIP_MODES,
    extends,
    head_blobs,
    ls_blobs,
)
from ._objects import (
    blobs as read_blobs,
)
from ._objects import (
    sizes as blob_sizes,
)
from ._run import git, git_ok, toplevel

__all__ = [
    "ALLOW_FILE",
    "MAX_SECRETS_SHOWN",
    "NOTES",
    "Policy",
    "Problem",
    "check_paths",
    "check_staged",
    "check_staged_paths",
]

_any = msgspec.json.Decoder().decode
ALLOW_FILE = ".jsonltape-allow"
ALLOW_CONFIG = "jsonltape.allowSecret"
#: Secret lines shown per file; the rest are counted in one more line.
MAX_SECRETS_SHOWN = 20
_EMPTY_SHA = "0" * 40


#: Kinds of :class:`Problem` that are said but refuse nothing.
NOTES = frozenset({"no-merge-attribute"})


class Problem(NamedTuple):
    """One reason to refuse (or, for a kind in :data:`NOTES`, one thing to say): the file
    (repository-relative for staged blobs) and one line."""

    path: str
    kind: str  #: not-a-session, corrupt, torn, secret, rewritten; no-merge-attribute (a note)
    what: str
    fingerprint: str | None = None

    @property
    def refuses(self) -> bool:
        return self.kind not in NOTES


class Policy(NamedTuple):
    """Which secrets are accepted."""

    allow_all: bool = False
    allowed: frozenset[str] = frozenset()


def read_allow_list(root: Path | None) -> frozenset[str]:
    """Fingerprints from ``ROOT/.jsonltape-allow`` and ``git config jsonltape.allowSecret``."""
    found: set[str] = set()
    base = root if root is not None else Path.cwd()
    # The repository chooses what is there: never followed, never read without end.
    data = read_repo_file(base / ALLOW_FILE) or b""
    for line in data.decode("utf-8", "replace").splitlines():
        item = line.split("#", 1)[0].strip()
        if item:
            found.add(item)
    if root is not None:
        out = git_ok(["config", "--get-all", ALLOW_CONFIG], cwd=root)
        if out:
            found.update(v.strip() for v in out.decode("utf-8", "replace").splitlines() if v)
    return frozenset(found)


# -- reading blobs --------------------------------------------------------------------------


class _Entry(NamedTuple):
    path: str
    new: str  #: the blob to check
    old: str | None  #: HEAD's blob of this path (or of the path it was renamed from)
    session: bool  #: marked as a session by its attributes (else: sniff the first line)
    merge: bool  #: git merges it with the jsonltape driver (merge=jsonltape)


def _staged_entries(root: Path) -> list[_Entry]:
    out = git(
        ["diff", "--cached", "--raw", "-z", "-M", "--no-abbrev", "--diff-filter=ACMR"], cwd=root
    )
    fields = out.split(b"\0")
    entries: list[tuple[str, str, str | None]] = []
    i = 0
    while i + 1 < len(fields) and fields[i].startswith(b":"):
        meta = fields[i][1:].decode().split()
        status = meta[4]
        if status[0] in "RC":
            path, i = fields[i + 2], i + 3
        else:
            path, i = fields[i + 1], i + 2
        if meta[1] in SKIP_MODES:
            continue
        old = None if meta[2] == _EMPTY_SHA or meta[0] in SKIP_MODES else meta[2]
        if status[0] == "C":
            old = None  # a copy starts a new file; its source is unchanged
        entries.append((os.fsdecode(path), meta[3], old))
    marked = session_attrs(root, [p for p, _, _ in entries])
    return [
        _Entry(p, new, old, p in marked, "merge" in marked.get(p, ()))
        for p, new, old in entries
        if p in marked or p.endswith(".jsonl")
    ]


def _note(root: Path, paths: Sequence[str], *, staged: bool) -> list[Problem]:
    """The one note of a run about session files git merges as text (none if all are marked)."""
    note = unmarked_note(root, paths, staged=staged)
    return [] if note is None else [Problem(paths[0], "no-merge-attribute", note)]


# -- checking one file -----------------------------------------------------------------------


class _Scratch:
    """One anonymous file the blobs are loaded into, so the reader's scan (which reads an fd)
    judges their lines exactly as it judges a file's."""

    def __init__(self) -> None:
        self.fd: int
        if hasattr(os, "memfd_create"):
            self.fd = os.memfd_create("jsonltape-check", os.MFD_CLOEXEC)
        else:  # pragma: no cover - not Linux
            self.fd, name = tempfile.mkstemp(prefix=".jsonltape-check")
            os.unlink(name)

    def load(self, data: bytes) -> int:
        """Make the scratch file hold exactly ``data``; return its fd."""
        os.ftruncate(self.fd, 0)
        view = memoryview(data)
        at = 0
        while at < len(view):
            at += os.pwrite(self.fd, view[at:], at)
        return self.fd

    def close(self) -> None:
        os.close(self.fd)


def _first_difference(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    step = 1 << 16
    at = 0
    while at < n and a[at : at + step] == b[at : at + step]:
        at += step
    end = min(at + step, n)
    while at < end and a[at] == b[at]:
        at += 1
    return at


def _good_end(scratch: _Scratch, data: bytes) -> int:
    """Where the good lines of ``data`` end (everything after is a torn or damaged tail)."""
    fd = scratch.load(data)
    end = 0
    for item in scan(fd, 0, 0):
        if isinstance(item, Bad):
            break
        end = item[0] + len(item[1]) + 1
    return end


def _line_at(data: bytes, at: int) -> tuple[int, int, int | None]:
    """(line number, line start, seq) of the line of ``data`` that holds byte ``at``."""
    start = data.rfind(b"\n", 0, at) + 1
    number = data.count(b"\n", 0, start) + 1
    end = data.find(b"\n", start)
    try:
        event, _ = problem_of(data[start : end + 1] if end >= 0 else data[start:], None)
    except RecursionError:
        event = None
    return number, start, event.seq if event is not None else None


def _seq_text(line: int, seq: int | None, byte: int) -> str:
    return (
        f"line {line} (seq {seq}, byte {byte})" if seq is not None else f"line {line} (byte {byte})"
    )


class _Checker:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.scratch = _Scratch()
        self.head_scratch: _Scratch | None = None

    def close(self) -> None:
        self.scratch.close()
        if self.head_scratch is not None:
            self.head_scratch.close()

    def check(self, path: str, data: bytes, head: bytes | None) -> list[Problem]:
        """Every problem of the file ``path`` whose bytes are ``data``; ``head`` is HEAD's."""
        problems: list[Problem] = []
        start, expected = 0, 0
        if head:
            if data.startswith(head):
                start, expected = self._after(head)
            else:
                problems += self._rewritten(path, data, head)
        fd = self.scratch.load(data)
        if start == 0:
            try:
                _hdr, hend, _ = read_header(fd, path)
            except FormatError as exc:
                problems.append(Problem(path, "not-a-session", exc.message))
                return problems
            start, expected = hend, 1
            header_kinds = None if self.policy.allow_all else may_hold_secret(data[:hend])
            if header_kinds is not None:
                problems += self._secrets(path, data[:hend], 0, header_kinds, None)
        problems += self._lines(path, fd, data, start, expected)
        return problems

    def _after(self, head: bytes) -> tuple[int, int]:
        """Where an incremental check of an extension of ``head`` starts, and the seq there;
        (0, 0) for a full check (HEAD does not end with a good line)."""
        if not head.endswith(b"\n"):
            return 0, 0
        last = head[head.rfind(b"\n", 0, len(head) - 1) + 1 :]
        try:
            event, problem = problem_of(last, None)
        except RecursionError:
            return 0, 0
        if problem is not None or event is None:
            return 0, 0
        return len(head), event.seq + 1

    def _rewritten(self, path: str, data: bytes, head: bytes) -> list[Problem]:
        at = _first_difference(data, head)
        if self.head_scratch is None:
            self.head_scratch = _Scratch()
        if at >= _good_end(self.head_scratch, head):
            return []  # only HEAD's torn tail differs: repair cut it, nothing committed changed
        line, start, seq = _line_at(head, at)
        where = _seq_text(line, seq, start)
        if at >= len(data):
            what = f"rewritten history: HEAD's lines from {where} on are gone (deleted lines)"
        else:
            what = (
                f"rewritten history: {where} differs from HEAD's version at byte {at}; a "
                "session is only appended to (a redacted copy is a new session: commit it "
                "under a new name)"
            )
        return [Problem(path, "rewritten", what)]

    def _lines(self, path: str, fd: int, data: bytes, start: int, expected: int) -> list[Problem]:
        problems: list[Problem] = []
        suspects: dict[int, set[str]] = {}  # line start -> the kinds that may match there
        chunks = None
        if not self.policy.allow_all:
            region = data[start:] if start else data
            line, end = -1, -1  # the line of the last hit: hits come sorted, one rfind a line
            for hit, admitted in sorted(screen(region)):
                if hit >= end:
                    line = region.rfind(b"\n", 0, hit) + 1
                    end = region.find(b"\n", hit)
                    end = len(region) if end < 0 else end
                suspects.setdefault(start + line, set()).update(admitted)
            chunks = chunks_after(fd, data, start, expected)
        shown = hidden = 0

        def add(found: list[Problem]) -> None:
            nonlocal shown, hidden
            for p in found:
                if shown < MAX_SECRETS_SHOWN:
                    problems.append(p)
                    shown += 1
                else:
                    hidden += 1

        if chunks is not None:
            add(self._chunk_secrets(path, chunks, expected))
        for item in scan(fd, start, expected):
            if isinstance(item, Bad):
                problems.append(self._bad(path, fd, data, item))
                break
            off, body, event = item
            flagged = suspects.get(off)
            extras = chunks.masks.get(off) if chunks is not None else None
            # A chunk's data is judged in its run, joined (`chunks`); its other members here.
            joined = ("data",) if chunks is not None and event.type == CHUNK else None
            if flagged is not None or extras:
                add(self._secrets(path, body, event.seq, flagged or (), extras, joined))
        if hidden:
            problems.append(
                Problem(
                    path,
                    "secret",
                    f"{hidden} more secrets not shown (the first {MAX_SECRETS_SHOWN} are above)",
                )
            )
        return problems

    def _bad(self, path: str, fd: int, data: bytes, bad: Bad) -> Problem:
        where = f"line {bad.line}, byte {bad.offset}" if bad.line else f"byte {bad.offset}"
        if bad.too_deep:
            return Problem(path, "corrupt", f"{where}: nests too deep to decode")
        if witness_after(fd, bad.offset + len(bad.raw)):
            return Problem(
                path,
                "corrupt",
                f"corrupt at {where}: {bad.problem}; a checkpoint after it proves it is not a "
                "crash tail (a bad edit or merge?): restore the file, or cut it there with "
                "`jsonltape repair --force`",
            )
        return Problem(
            path,
            "torn",
            f"torn tail at {where} ({len(data) - bad.offset} bytes): {bad.problem}; a writer "
            "may be mid-write: wait for it to close, or run `jsonltape repair`",
        )

    def _secrets(
        self,
        path: str,
        body: bytes,
        seq: int,
        kinds: Collection[str],
        extras: Mapping[MemberPath, Sequence[Span]] | None,
        joined: MemberPath | None = None,
    ) -> list[Problem]:
        """The secrets of one line, in any member (a header line is seq 0)."""
        found: list[Secret] = []
        try:
            members: dict[str, Any] = _any(body)
        except (msgspec.DecodeError, RecursionError):
            return []  # the line check says what is wrong with it
        members.pop("crc", None)
        mask_members(members, Masker(found, kinds, extras=extras, joined=joined))
        return self._report(path, [(f"line {seq + 1} (seq {seq})", s) for s in found])

    def _chunk_secrets(self, path: str, chunks: Chunks, expected: int) -> list[Problem]:
        """The secrets of runs of chunks joined that cover a chunk being committed."""
        out = []
        for c in chunks.secrets:
            if c.seqs[-1] < expected:
                continue  # all in HEAD's lines: committed already
            first, last = c.seqs[0], c.seqs[-1]
            lines = f"lines {first + 1}-{last + 1} (seqs {first}-{last})"
            what = f"{lines}, split across {len(c.seqs)} {CHUNK} events"
            out.append((what if len(c.seqs) > 1 else f"line {first + 1} (seq {first})", c.secret))
        return self._report(path, out)

    def _report(self, path: str, found: list[tuple[str, Secret]]) -> list[Problem]:
        problems: list[Problem] = []
        seen: set[str] = set()
        for at, s in found:
            fp = fingerprint(s.kind, s.matched)
            if fp in seen or fp in self.policy.allowed:
                continue
            seen.add(fp)
            inside = f" in {s.where}" if s.where else ""
            problems.append(
                Problem(
                    path,
                    "secret",
                    f"{at}: a secret ({s.kind} rule, fingerprint {fp}){inside}",
                    fp,
                )
            )
        return problems


# -- the three ways in ------------------------------------------------------------------------


def _run_checks(root: Path, entries: Sequence[_Entry], policy: Policy) -> list[Problem]:
    """Every problem of ``entries``, in their order. HEAD's blob of a file is not read when
    the staged blob starts with it, which its id proves: git names a blob by the hash of its
    size and bytes, so the hash of the staged blob's first ``size`` bytes equals HEAD's id
    exactly when they are HEAD's bytes (the usual commit, an append, then reads each byte
    once). Only the files where it does not (a rewrite, a repaired tail) read HEAD's blob, in
    a second pass."""
    sizes = blob_sizes(root, [e.old for e in entries if e.old is not None])
    found: list[list[Problem]] = [[] for _ in entries]
    again: list[int] = []  # entries whose HEAD blob is needed after all
    unmarked: list[str] = []  # sessions git merges as text
    checker = _Checker(policy)
    try:
        blobs = read_blobs(root, [e.new for e in entries])
        try:
            for i, e in enumerate(entries):
                data = _staged(root, e, next(blobs))
                if data is None:
                    continue
                if not e.merge and looks_like_session(data):
                    unmarked.append(e.path)
                head = None
                if e.old is not None:
                    size = sizes.get(e.old)
                    if size is None or not extends(data, size, e.old):
                        again.append(i)
                        continue
                    head = data[:size]
                found[i] = checker.check(e.path, data, head)
        finally:
            for _ in blobs:  # drain, so git exits
                pass
        pairs: list[str] = []
        for i in again:
            pairs += (entries[i].new, entries[i].old or "")
        blobs = read_blobs(root, pairs)
        try:
            for i in again:
                data, head = _staged(root, entries[i], next(blobs)), next(blobs)
                if data is not None:
                    found[i] = checker.check(entries[i].path, data, head)
        finally:
            for _ in blobs:
                pass
    finally:
        checker.close()
    return _note(root, unmarked, staged=True) + [p for problems in found for p in problems]


def _staged(root: Path, e: _Entry, data: bytes | None) -> bytes | None:
    """The staged bytes of ``e``, or None when it is no session (not marked, not sniffed)."""
    if data is None:
        raise GitError(f"{e.path}: the staged blob {e.new} is missing", path=str(root))
    if not e.session and not looks_like_session(data):
        return None
    return data


def _root(cwd: Path) -> Path:
    root = toplevel(cwd)
    if root is None:
        raise GitError("not inside a git work tree", path=str(cwd))
    return root


def check_staged(
    cwd: str | os.PathLike[str] = ".", *, allow_secrets: bool = False
) -> list[Problem]:
    """The pre-commit check of every staged session file of the repository at ``cwd``."""
    root = _root(Path(cwd))
    policy = Policy(allow_secrets, read_allow_list(root))
    return _run_checks(root, _staged_entries(root), policy)


def _relative(root: Path, paths: Iterable[Path]) -> list[str]:
    out = []
    for p in paths:
        full = Path(os.path.abspath(p))
        try:
            out.append(full.relative_to(root).as_posix())
        except ValueError:
            raise GitError("is outside the repository's work tree", path=str(p)) from None
    return out


def check_staged_paths(
    paths: Sequence[Path], cwd: str | os.PathLike[str] = ".", *, allow_secrets: bool = False
) -> list[Problem]:
    """``check --staged PATH...``: the staged blobs of the named files, whatever their
    attributes (a named file not in the index is reported)."""
    root = _root(Path(cwd))
    rel = _relative(root.resolve(), (p.resolve() for p in paths))
    staged = ls_blobs(root, ["ls-files", "-s", "--full-name"], rel)
    head = head_blobs(root, rel)
    problems = [Problem(r, "not-staged", "not in the index") for r in rel if r not in staged]
    marked = session_attrs(root, [r for r in rel if r in staged])
    entries = [
        _Entry(r, staged[r], head.get(r), True, "merge" in marked.get(r, ()))
        for r in rel
        if r in staged
    ]
    policy = Policy(allow_secrets, read_allow_list(root))
    return problems + _run_checks(root, entries, policy)


def check_paths(paths: Sequence[Path], *, allow_secrets: bool = False) -> list[Problem]:
    """``check PATH...``: the files in the work tree; each one inside a git work tree is also
    compared with HEAD's version of it (rewritten history)."""
    problems: list[Problem] = []
    by_root: dict[Path | None, list[Path]] = {}
    roots: dict[Path, Path | None] = {}  # one `git rev-parse` per directory, not per file
    for p in paths:
        parent = Path(os.path.abspath(p)).parent
        if parent not in roots:
            roots[parent] = toplevel(parent) if parent.is_dir() else None
        by_root.setdefault(roots[parent], []).append(p)
    for root, group in by_root.items():
        heads: dict[str, bytes | None] = {}
        merged: set[str] | None = None  # the files git merges with our driver (in a repository)
        if root is not None:
            rel = _relative(root.resolve(), (p.resolve() for p in group))
            shas = head_blobs(root, rel)
            wanted = [r for r in rel if r in shas]
            for r, blob in zip(wanted, read_blobs(root, [shas[r] for r in wanted]), strict=True):
                heads[r] = blob
            names = rel
            merged = {p for p, attrs in session_attrs(root, rel).items() if "merge" in attrs}
        else:
            names = [str(p) for p in group]
        checker = _Checker(Policy(allow_secrets, read_allow_list(root)))
        unmarked: list[str] = []
        found: list[Problem] = []
        try:
            for p, name in zip(group, names, strict=True):
                data = _read_file(p)
                if merged is not None and name not in merged and looks_like_session(data):
                    unmarked.append(name)
                found += [
                    q._replace(path=str(p)) for q in checker.check(str(p), data, heads.get(name))
                ]
        finally:
            checker.close()
        problems += (_note(root, unmarked, staged=False) if root else []) + found
    return problems


def _read_file(p: Path) -> bytes:
    from .. import _fs

    fd = _fs.open_for_read(_fs.session_path(p))
    try:
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)
