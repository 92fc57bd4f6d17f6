"""The origin: which machine and user a shared index's rows came from.

In a shared (PostgreSQL) index every session, event and message row carries the origin of the
daemon that pushed it, so two machines can never collide and each writer reconciles only its
own rows. ``--origin NAME`` or ``$JSONLTAPE_ORIGIN`` names it; otherwise it is read from
``<data dir>/origin``, written once (0600) as ``user@host-xxxxxx`` with six random hex digits:
readable in search results, and stable when the host is renamed, since the file stays.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from pathlib import Path

from jsonltape._index_api import fs
from jsonltape.errors import InvalidArgumentError
from jsonltape_daemon.paths import data_dir as user_data_dir
from jsonltape_daemon.paths import ensure_private_dir

__all__ = ["ORIGIN_RE", "default_origin", "known_origin", "validate"]

#: An origin: 1–64 characters, letters, digits and ``. _ @ + -``, starting with a letter or digit.
ORIGIN_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def validate(name: str) -> str:
    """``name`` if it is a valid origin, else :class:`InvalidArgumentError`."""
    if not ORIGIN_RE.fullmatch(name):
        raise InvalidArgumentError(
            f"origin {name!r}: use 1-64 letters, digits and . _ @ + - (starting with a letter "
            "or digit)",
            field="origin",
        )
    return name


def _clean(part: str, fallback: str) -> str:
    part = _UNSAFE.sub("-", part).strip("-._+")[:24]
    return part or fallback


def known_origin(data_dir: Path | None = None) -> str | None:
    """``$JSONLTAPE_ORIGIN``, else this machine and user's origin if it has one yet (None:
    nothing is created; a viewer names the origin of a local index's sessions with it).
    ``data_dir``: jsonltape's user data directory unless given."""
    env = os.environ.get("JSONLTAPE_ORIGIN")
    if env:
        return validate(env)
    if data_dir is None:
        data_dir = user_data_dir()
    try:
        return validate((data_dir / "origin").read_text(encoding="utf-8").strip())
    except FileNotFoundError:
        return None


def default_origin(data_dir: Path) -> str:
    """``$JSONLTAPE_ORIGIN``, else this machine and user's origin (created on first use)."""
    known = known_origin(data_dir)
    if known is not None:
        return known
    path = data_dir / "origin"
    user = os.environ.get("USER") or os.environ.get("USERNAME") or "user"
    host = socket.gethostname().split(".")[0]
    name = f"{_clean(user, 'user')}@{_clean(host, 'host')}-{secrets.token_hex(3)}"
    ensure_private_dir(data_dir)
    # Written whole under a temporary name, then linked: a reader never sees it half-written,
    # and of two first uses at once the first link wins and both return its name.
    tmp = path.with_name(f".origin.{os.getpid()}.{secrets.token_hex(4)}")
    fd = fs.create_exclusive(tmp)
    try:
        os.write(fd, (name + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return validate(path.read_text(encoding="utf-8").strip())
    finally:
        tmp.unlink()
    return name
