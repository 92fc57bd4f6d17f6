"""Errors of the index and the daemon. They derive from the library's root error so the CLI
maps them to exit codes in one place (2 bad input / unusable index, 4 index held by a daemon).
"""

from __future__ import annotations

from jsonltape.errors import JsonltapeError, LockedError

__all__ = [
    "DaemonError",
    "EngineMissingError",
    "FeatureMissingError",
    "IndexBusyError",
    "IndexStateError",
    "IndexTargetError",
    "IndexUnreachableError",
    "SearchStoppedError",
]


class IndexStateError(JsonltapeError):
    """The index cannot be used as it is: missing, written by a newer version, unreadable."""

    code = "index-unusable"


class FeatureMissingError(IndexStateError):
    """This Python's SQLite lacks FTS5 or its trigram tokenizer."""

    code = "sqlite-feature-missing"


class IndexTargetError(IndexStateError):
    """``--index`` names no engine jsonltape has: a URL with an unknown scheme (``scheme``),
    or a connection string that is none (``scheme`` None)."""

    code = "index-target"

    def __init__(self, message: str, *, scheme: str | None) -> None:
        super().__init__(message)
        self.scheme = scheme


class IndexUnreachableError(IndexStateError):
    """The PostgreSQL index cannot be reached: the connection failed or was lost."""

    code = "index-unreachable"


class EngineMissingError(IndexStateError):
    """The index is a PostgreSQL URL but psycopg 3 is not installed."""

    code = "engine-missing"


class IndexBusyError(LockedError):
    """Another daemon or sync holds the index's writer lock."""

    code = "index-busy"


class DaemonError(JsonltapeError):
    """The daemon could not be started, stopped or reached."""

    code = "daemon"


class SearchStoppedError(JsonltapeError):
    """A search was stopped before its end because its asker no longer wanted it (a search as
    you type overtaken by the next keystroke, a viewer's client that left)."""

    code = "search-stopped"
