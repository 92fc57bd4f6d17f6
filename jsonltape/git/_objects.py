"""Reading git's objects for the commit guard: blobs through one ``git cat-file --batch``, blob
sizes, tree and index listings, and whether a blob is a prefix of staged bytes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import GitError
from ._run import env, git, git_ok, git_program

__all__ = ["blobs", "extends", "git_input", "head_blobs", "ls_blobs", "sizes"]

#: A submodule, a symlink: no session bytes of ours.
SKIP_MODES = ("160000", "120000")


def blobs(root: Path, shas: Sequence[str]) -> Iterator[bytes | None]:
    """Each object's bytes in order (None when missing), through one ``git cat-file --batch``.

    A thread feeds the names: git answers while it reads, and with both pipes full a single
    thread writing all names first would wait forever.
    """
    if not shas:
        return
    proc = subprocess.Popen(
        [git_program(), "cat-file", "--batch"],
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def feed() -> None:
        try:
            stdin.write(b"".join(s.encode() + b"\n" for s in shas))
            stdin.close()
        except BrokenPipeError:  # git stopped early: the reader reports it
            pass

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        for _ in shas:
            head = stdout.readline()
            parts = head.split()
            if len(parts) == 2 and parts[1] == b"missing":
                yield None
                continue
            if len(parts) != 3:
                raise GitError(f"git cat-file: unexpected reply {head[:80]!r}", path=str(root))
            size = int(parts[2])
            data = stdout.read(size)
            stdout.read(1)  # the newline after the contents
            if len(data) != size:
                raise GitError("git cat-file ended early", path=str(root))
            yield data
    finally:
        # Closing our end first: a reader that stopped early makes git's next write fail, so
        # git exits and the feeder's write returns; then nothing waits on anything.
        stdout.close()
        proc.wait()
        feeder.join()


def git_input(args: list[str], cwd: Path, data: bytes) -> bytes:
    return git(args, cwd=cwd, input=data)


def extends(data: bytes, size: int, blob_id: str) -> bool:
    """Whether the first ``size`` bytes of ``data`` are the blob ``blob_id`` (SHA-1 or, in a
    SHA-256 repository, SHA-256 of ``blob <size>\\0`` and the bytes, as git names blobs)."""
    if size > len(data):
        return False
    digest = hashlib.sha1() if len(blob_id) == 40 else hashlib.sha256()
    digest.update(b"blob %d\0" % size)
    digest.update(memoryview(data)[:size])
    return digest.hexdigest() == blob_id


def sizes(root: Path, shas: Sequence[str]) -> dict[str, int]:
    """Blob id -> size, from one ``git cat-file --batch-check`` (a missing one is left out)."""
    if not shas:
        return {}
    out = git_input(["cat-file", "--batch-check"], root, "".join(f"{s}\n" for s in shas).encode())
    sizes: dict[str, int] = {}
    for line in out.decode().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "blob":
            sizes[parts[0]] = int(parts[2])
    return sizes


def ls_blobs(root: Path, args: list[str], paths: Sequence[str]) -> dict[str, str]:
    """path -> blob sha from ``git ls-files -s`` / ``git ls-tree`` (NUL-separated output)."""
    out = git([*args, "-z", "--", *paths], cwd=root) if paths else b""
    found: dict[str, str] = {}
    for rec in out.split(b"\0"):
        if not rec:
            continue
        meta, _, name = rec.partition(b"\t")
        fields = meta.decode().split()
        if fields[0] in SKIP_MODES:
            continue
        sha = fields[1] if len(fields) == 3 and args[0] == "ls-files" else fields[2]
        found[os.fsdecode(name)] = sha
    return found


def head_blobs(root: Path, rel: Sequence[str]) -> dict[str, str]:
    if git_ok(["rev-parse", "--verify", "-q", "HEAD"], cwd=root) is None:
        return {}  # no commit yet
    return ls_blobs(root, ["ls-tree", "--full-tree", "HEAD"], rel)
