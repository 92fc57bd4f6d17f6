"""The SQLite schema of the index, its numbered migrations, and connection set-up.

The schema is documented in ``daemon/SCHEMA.md``; a test checks that document against
``MIGRATIONS``. ``PRAGMA user_version`` holds the schema version and the ``migrations`` table
records when each step ran. An index whose version is newer than :data:`SCHEMA_VERSION` was
written by a newer jsonltape and is refused, never "upgraded" downwards.

Connections: WAL, ``synchronous=NORMAL`` (the index is derived: a power cut may lose the last
transactions, which the next sync redoes from the files), a busy timeout, and every write
transaction ``BEGIN IMMEDIATE`` so a reader never has to upgrade to a writer.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from jsonltape_daemon.engines.sqlite.failures import storage_error
from jsonltape_daemon.engines.sqlite.words import WORDS_TABLE
from jsonltape_daemon.errors import FeatureMissingError, IndexStateError
from jsonltape_daemon.paths import ensure_private_dir

__all__ = [
    "FTS_CJK",
    "FTS_TRIGRAM",
    "FTS_WORDS",
    "MIGRATIONS",
    "READABLE_FROM",
    "SCHEMA_VERSION",
    "TKEY_SPAN",
    "connect",
    "create_private",
    "features",
    "finish_bulk_merging",
    "migrate",
    "probe",
    "start_bulk_merging",
    "tkey_base",
]

BUSY_TIMEOUT_MS = 10_000
#: Page size of a new index: rows and full-text segments fill 8 KiB pages better than 4 KiB
#: (a bulk load measured ~15% faster), and small appends still touch few bytes.
PAGE_SIZE = 8192
#: Page cache per connection (KiB). A bulk load had 256 MiB: at 1M events (bench_search.py)
#: 32 MiB loads as fast (69.0 s against 66.5 s wall, 92.7 s against 93.6 s CPU, one run each)
#: and the sync peaks at 141 MB over its two processes instead of 623 MB.
CACHE_KIB = 32 * 1024
BULK_CACHE_KIB = 32 * 1024
#: Page cache of a read-only connection (KiB). A search that ranks matches spread over the
#: whole archive reads a page per match (its messages row, its key, its _docsize row): at 1M
#: events `migr* --role user` checks 3,803 matches and with 32 MiB read 4,532 pages per search
#: again from the OS, none with 128 MiB. Pages are allocated as they are read: a one-shot
#: `jsonltape search` uses only what it reads.
READER_CACHE_KIB = 128 * 1024

#: Read-only connections map the index instead of copying its pages: a one-shot `jsonltape
#: search` starts with an empty page cache, and reading its first pages through `pread` cost
#: 2-7 ms of the first query at 1M events (`migr*` 15 -> 9 ms, `Fou` 5 -> 3). SQLite caps the
#: size at its compile-time maximum (2 GiB by default); pages past it are read as before.
READER_MMAP_BYTES = 1 << 40

#: The full-text tables, contentless (``content=''``): the index keeps no copy of the message
#: texts, the session files hold them (``texts.py`` reads them back). Their rowid is
#: ``messages.tkey``, a key in time order, so that FTS5's own rowid order is newest first: a
#: query reads the newest matches and stops (see ``search.py``). Rows are never deleted from
#: them (a contentless delete needs the old text): the keys of messages that went away are in
#: ``dead_keys``, never given again, and ``index optimize`` rebuilds the tables without them.
#: The bulk-load helper process builds identical ones (``fts_helper.py``).
FTS_WORDS = (
    "CREATE VIRTUAL TABLE messages_fts USING fts5(text, content='', "
    "tokenize='unicode61 remove_diacritics 2')"
)
#: Only the code-like tokens of each message (``idents.py``), ``detail='none'``: a substring
#: is found as every one of its trigrams, then checked on the text (``search.py``). It and
#: the CJK table are never ranked: ``columnsize=0`` (no ``_docsize`` table).
FTS_TRIGRAM = (
    "CREATE VIRTUAL TABLE messages_trigram USING fts5(idents, content='', tokenize='trigram', "
    "detail='none', columnsize=0)"
)
#: CJK characters and adjacent pairs of them (``cjk.py``), ``detail='none'``: candidates,
#: checked on the text.
FTS_CJK = (
    "CREATE VIRTUAL TABLE messages_cjk USING fts5(grams, content='', tokenize='ascii', "
    "detail='none', columnsize=0)"
)
#: A bulk build of a full-text table (the helper's word and substring indexes, the loader's CJK
#: table) lets FTS5 merge no segments while it writes (``automerge``, which would copy each one
#: into bigger ones again and again as they pile up; ``crisismerge`` still bounds how many a
#: very large load leaves), then merges the table into one segment ('optimize') and puts FTS5's
#: default merge settings back: the table keeps them (its ``_config``) for the syncs after. 1M
#: events: the word index 7.0-9.2 -> 5.3-6.4 s of CPU, the trigram index 11.8 -> 8.2-9.0 s, and
#: a query reads one segment of each instead of 9-13.
_BULK_MERGE = (("automerge", 0), ("crisismerge", 64))
_DEFAULT_MERGE = (("automerge", 4), ("crisismerge", 16))


def _merge_settings(
    con: sqlite3.Connection, table: str, values: tuple[tuple[str, int], ...]
) -> None:
    for key, value in values:
        con.execute(f"INSERT INTO {table} ({table}, rank) VALUES (?, ?)", (key, value))


def start_bulk_merging(con: sqlite3.Connection, table: str) -> None:
    """Stop FTS5's merging in ``table`` for a bulk build (see above)."""
    _merge_settings(con, table, _BULK_MERGE)


def finish_bulk_merging(con: sqlite3.Connection, table: str) -> None:
    """Merge ``table`` into one segment and give it FTS5's default merge settings back."""
    con.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
    _merge_settings(con, table, _DEFAULT_MERGE)


#: ``messages.tkey`` is at least ``time // 1000 * TKEY_SPAN`` (the second, then a slot): keys of
#: one second are told apart by the slot, and a message whose key is taken (a second with more
#: messages than slots) takes the first free key after it (``keys.py``). Small steps between the
#: keys of neighbouring messages keep the full-text doclists (delta-coded rowids) as small as
#: with insertion-order ids.
TKEY_SPAN = 64


def tkey_base(time_ms: int) -> int:
    """The smallest key a message of this time can have."""
    return time_ms // 1000 * TKEY_SPAN


_M001 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE migrations (
    version INTEGER PRIMARY KEY,
    name    TEXT NOT NULL,
    applied INTEGER NOT NULL
);
CREATE TABLE sessions (
    sid        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL,
    path       TEXT NOT NULL UNIQUE,
    header_crc TEXT NOT NULL,
    title      TEXT,
    cwd        TEXT,
    agent      TEXT,
    created    INTEGER NOT NULL,
    updated    INTEGER NOT NULL,
    parent     TEXT,
    parent_seq INTEGER,
    events     INTEGER NOT NULL,
    messages   INTEGER NOT NULL,
    state      TEXT NOT NULL,
    error      TEXT,
    open_turn  INTEGER,
    closed     INTEGER NOT NULL
);
CREATE INDEX sessions_updated ON sessions (updated DESC);
CREATE INDEX sessions_id ON sessions (id);
CREATE TABLE files (
    path     TEXT PRIMARY KEY,
    sid      INTEGER,
    status   TEXT NOT NULL,
    error    TEXT,
    dev      INTEGER,
    ino      INTEGER,
    size     INTEGER,
    mtime_ns INTEGER,
    offset   INTEGER NOT NULL,
    last_seq INTEGER,
    last_crc TEXT
);
CREATE INDEX files_sid ON files (sid);
CREATE TABLE events (
    sid    INTEGER NOT NULL,
    seq    INTEGER NOT NULL,
    type   TEXT NOT NULL,
    time   INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    raw    TEXT NOT NULL,
    PRIMARY KEY (sid, seq)
);
CREATE TABLE messages (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    sid       INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    type      TEXT NOT NULL,
    role      TEXT NOT NULL,
    time      INTEGER NOT NULL,
    status    TEXT NOT NULL,
    anchor    INTEGER,
    call_id   TEXT,
    calls     TEXT,
    text      TEXT NOT NULL,
    truncated INTEGER NOT NULL,
    UNIQUE (sid, seq)
);
CREATE INDEX messages_surface ON messages (sid, anchor) WHERE status = 'current';
CREATE INDEX messages_answers ON messages (sid, call_id)
    WHERE status = 'current' AND call_id IS NOT NULL;
CREATE TABLE tool_calls (
    sid     INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    PRIMARY KEY (sid, call_id, seq)
) WITHOUT ROWID;
CREATE VIRTUAL TABLE messages_fts USING fts5(text, content='messages', content_rowid='id',
    tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE messages_trigram USING fts5(text, content='messages', content_rowid='id',
    tokenize='trigram');
CREATE VIRTUAL TABLE messages_cjk USING fts5(uni, bi, tokenize='ascii');
INSERT INTO meta (key, value) VALUES ('fts', 'live');
INSERT INTO meta (key, value) VALUES ('substrings', '0');
"""

# The columns of ``events`` from step 2 on (step 6 changes only how the table is stored).
_EVENT_COLUMNS = """
    sid    INTEGER NOT NULL,
    seq    INTEGER NOT NULL,
    type   TEXT NOT NULL,
    time   INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    size   INTEGER NOT NULL,
    crc    TEXT NOT NULL,
    PRIMARY KEY (sid, seq)
"""

# Messages get a key in time order (``tkey``), the rowid of every full-text table, and events
# keep where their line is and its crc instead of a copy of it (the file is the truth). The
# rows are derived, so this step empties the index (roots and settings stay): the next sync
# reads every file again.
_M002 = f"""
DELETE FROM files;
DELETE FROM sessions;
DELETE FROM tool_calls;
DROP TABLE events;
CREATE TABLE events ({_EVENT_COLUMNS});
DROP TABLE messages_fts;
DROP TABLE messages_trigram;
DROP TABLE messages_cjk;
DROP TABLE messages;
CREATE TABLE messages (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    tkey      INTEGER NOT NULL UNIQUE,
    sid       INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    type      TEXT NOT NULL,
    role      TEXT NOT NULL,
    time      INTEGER NOT NULL,
    status    TEXT NOT NULL,
    anchor    INTEGER,
    call_id   TEXT,
    calls     TEXT,
    text      TEXT NOT NULL,
    truncated INTEGER NOT NULL,
    UNIQUE (sid, seq)
);
CREATE INDEX messages_surface ON messages (sid, anchor) WHERE status = 'current';
CREATE INDEX messages_answers ON messages (sid, call_id)
    WHERE status = 'current' AND call_id IS NOT NULL;
CREATE VIRTUAL TABLE messages_fts USING fts5(text, content='messages', content_rowid='tkey',
    tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE messages_trigram USING fts5(text, content='messages', content_rowid='tkey',
    tokenize='trigram', detail='none');
CREATE VIRTUAL TABLE messages_cjk USING fts5(uni, bi, tokenize='ascii');
UPDATE meta SET value = 'live' WHERE key = 'fts';
UPDATE meta SET value = '0' WHERE key = 'substrings';
"""

# The index keeps no copy of the message texts (the files are the truth; ``texts.py`` reads
# them back), except for sessions that cannot be read back from a byte range of a jsonltape
# file (``message_texts``). The full-text tables become contentless; the keys of deleted
# messages go to ``dead_keys``. The substring table holds only code-like tokens
# (``idents.py``). Like _M002, this empties the index (roots and settings stay).
_M003 = f"""
DELETE FROM files;
DELETE FROM sessions;
DELETE FROM tool_calls;
DELETE FROM events;
DROP TABLE messages_fts;
DROP TABLE messages_trigram;
DROP TABLE messages_cjk;
DROP TABLE messages;
CREATE TABLE messages (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    tkey      INTEGER NOT NULL UNIQUE,
    sid       INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    type      TEXT NOT NULL,
    role      TEXT NOT NULL,
    time      INTEGER NOT NULL,
    status    TEXT NOT NULL,
    anchor    INTEGER,
    call_id   TEXT,
    calls     TEXT,
    truncated INTEGER NOT NULL,
    UNIQUE (sid, seq)
);
CREATE INDEX messages_surface ON messages (sid, anchor) WHERE status = 'current';
CREATE INDEX messages_answers ON messages (sid, call_id)
    WHERE status = 'current' AND call_id IS NOT NULL;
CREATE TABLE message_texts (
    tkey INTEGER PRIMARY KEY,
    text TEXT NOT NULL
);
CREATE TABLE dead_keys (
    tkey INTEGER PRIMARY KEY
);
{FTS_WORDS};
{FTS_TRIGRAM};
{FTS_CJK};
UPDATE meta SET value = 'live' WHERE key = 'fts';
UPDATE meta SET value = '0' WHERE key = 'substrings';
"""

# A filtered search (--role, --type, since/until) checks each match's messages row; this
# index holds what the filters read beside the key, so the check is one lookup without the
# row (1M events: `stand --role user` p50 17.2 -> 11.3 ms, `migr* --role user` 18.4 -> 12.7;
# 32 MB, the index 1.33x -> 1.41x the session files).
_M004 = """
CREATE INDEX messages_filter ON messages (tkey, status, role, type, time, sid);
"""

# `until` and role/type filters get bounds of their own (a common word `--until` last month read
# every newer match first: 1M events, `the --until` 200-330 ms, `--type` of a type no message
# has 360-445 ms). ``meta.tkey_spill`` is the most any key has gone past its second's base
# (``tkey - tkey_base(time)``, never lowered), so every message before ``until`` has a key
# below ``tkey_base(until) + spill + 1``; ``message_kinds`` holds each (role, type) pair any
# message has had (never pruned), so a filter no pair satisfies has no hits. A time is never
# negative (spec §6), so SQLite's ``/`` is the floor division of ``tkey_base``.
_M005 = f"""
CREATE TABLE message_kinds (
    role TEXT NOT NULL,
    type TEXT NOT NULL,
    PRIMARY KEY (role, type)
) WITHOUT ROWID;
INSERT INTO message_kinds (role, type) SELECT DISTINCT role, type FROM messages;
INSERT OR REPLACE INTO meta (key, value)
    SELECT 'tkey_spill', CAST(coalesce(max(tkey - {TKEY_SPAN} * (time / 1000)), 0) AS TEXT)
    FROM messages;
"""

# Events are only ever looked up by (sid, seq): a table keyed by it alone holds each row once
# instead of in a rowid table and an index beside it (1M events, a new index: 64 -> 51 MB;
# inserting them in a bulk load 1.5 -> 1.2 s of CPU). Rebuilt in place (nothing is read again;
# a migrated file keeps the old table's pages free until a rebuild).
_M006 = f"""
CREATE TABLE events_by_seq ({_EVENT_COLUMNS}) WITHOUT ROWID;
INSERT INTO events_by_seq (sid, seq, type, time, offset, size, crc)
    SELECT sid, seq, type, time, offset, size, crc FROM events ORDER BY sid, seq;
DROP TABLE events;
ALTER TABLE events_by_seq RENAME TO events;
"""

# A session or path filter reads only the keys between the first and the last of its sessions'
# messages (1M events, a path filter of 100 early sessions: a common word 210 -> 2 ms).
# Before, up to 64 sessions were bounded by reading their rows; the bounds are now kept per
# session: messages are only ever added to a session (a status changes, a key never), so they
# only widen, and go with the session's row.
_M007 = """
ALTER TABLE sessions ADD COLUMN key_lo INTEGER;
ALTER TABLE sessions ADD COLUMN key_hi INTEGER;
UPDATE sessions SET
    key_lo = (SELECT min(tkey) FROM messages m WHERE m.sid = sessions.sid),
    key_hi = (SELECT max(tkey) FROM messages m WHERE m.sid = sessions.sid);
"""

# A prefix is read as the words it begins (``words.py``): FTS5's own prefix query merges the
# doclists of all of them at every query's start (5M messages: ``co*`` 390 ms). The list is
# taken from the word index's vocabulary once, here; later syncs add to it.
_M008 = f"""
{WORDS_TABLE};
DELETE FROM words;
CREATE VIRTUAL TABLE temp.words_vocab USING fts5vocab(main, messages_fts, 'row');
INSERT INTO words (term, docs) SELECT term, doc FROM temp.words_vocab;
DROP TABLE temp.words_vocab;
"""

# A message whose preferred key is taken gets the first free key above it (``keys.py``); the
# stretches of taken keys such a search crossed are kept, so that the next one jumps them whole
# (100k messages in one second took each batch a walk over the whole burst: quadratic). Only a
# shortcut (every key of a run is taken): created empty, filled as searches cross stretches
# (and emptied if an index taken back to an older schema by hand kept one: it may be stale).
_M009 = """
CREATE TABLE IF NOT EXISTS key_runs (
    lo INTEGER PRIMARY KEY,
    hi INTEGER NOT NULL
);
DELETE FROM key_runs;
"""

# A session's forks and sub-agent sessions are the rows whose parent is its id (the viewer's
# transcript page lists them): without an index each lookup read every session row (20,000
# sessions: 6 ms). Few sessions have a parent, so only those are in the index. There is no
# step 10: usage, numbered 10 on its branch, was merged after this step and runs as 12.
_M011 = """
CREATE INDEX IF NOT EXISTS sessions_parent ON sessions (parent) WHERE parent IS NOT NULL;
"""

# Token usage (``usage.py``, issue 31): a row per response with its key, the counted rows
# summed per 15-minute slot, and each session's names in the sub-agent tree. Numbered 12, after
# 11, which was merged first (an index at 11 would never run a step 10); it depends on no step
# after 8 (and creates only what is missing, so a test's hand-made older index keeps its rows).
# Sessions indexed before it get their rows from the next sync (``ingest/usage.py``: read back
# from the files, foreign ones ingested again).
#: The token counts of a response (and of their sums), as billed (``jsonltape.usage.Tokens``).
_TOKEN_COLUMNS = "".join(
    f"    {name:<10} INTEGER NOT NULL,\n"
    for name in ("input", "output", "cache_5m", "cache_1h", "cache_read", "reasoning")
)
_M012 = f"""
CREATE TABLE IF NOT EXISTS usage (
    sid        INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    rkey       TEXT NOT NULL,
    time       INTEGER NOT NULL,
    model      TEXT NOT NULL,
{_TOKEN_COLUMNS}    tier       INTEGER NOT NULL,
    fast       INTEGER NOT NULL,
    counted    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (sid, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS usage_rkey ON usage (rkey);
CREATE INDEX IF NOT EXISTS usage_time ON usage (time) WHERE counted;
CREATE TABLE IF NOT EXISTS usage_slots (
    sid        INTEGER NOT NULL,
    slot       INTEGER NOT NULL,
    model      TEXT NOT NULL,
    tier       INTEGER NOT NULL,
    fast       INTEGER NOT NULL,
    responses  INTEGER NOT NULL,
{_TOKEN_COLUMNS}    PRIMARY KEY (sid, slot, model, tier, fast)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS usage_slots_slot ON usage_slots (slot);
CREATE TABLE IF NOT EXISTS usage_sessions (
    sid   INTEGER PRIMARY KEY,
    name  TEXT NOT NULL,
    alias TEXT,
    up    TEXT
);
"""

#: (version, name, SQL). Append only; never edit a released step.
MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "initial", _M001),
    (2, "time-ordered message keys", _M002),
    (3, "texts from the files", _M003),
    (4, "a covering index for filters", _M004),
    (5, "bounds for until and kind filters", _M005),
    (6, "events keyed by session and seq", _M006),
    (7, "key bounds per session", _M007),
    (8, "the word list", _M008),
    (9, "runs of taken keys", _M009),
    (11, "forks by parent", _M011),
    (12, "token usage", _M012),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]
#: The oldest schema a search can read as it is: the steps after it only add indexes, tables,
#: columns and settings, or (6) store a table differently, so a `jsonltape search` right after
#: an upgrade works before a sync (or the daemon) migrates.
READABLE_FROM = 3


def probe(connect_: Callable[[], sqlite3.Connection] | None = None) -> None:
    """Check that SQLite has FTS5 and the trigram tokenizer; raise a clear error if not."""
    con = (connect_ or (lambda: sqlite3.connect(":memory:")))()
    try:
        missing = [name for name, ok in features(con).items() if not ok]
    finally:
        con.close()
    if missing:
        raise FeatureMissingError(
            f"this Python's SQLite {sqlite3.sqlite_version} lacks {' and '.join(missing)}; "
            "the index needs SQLite >= 3.34 built with FTS5 (use a Python from python.org, "
            "Homebrew or your distribution, or install the 'pysqlite3-binary' wheel)"
        )


def features(con: sqlite3.Connection) -> dict[str, bool]:
    found: dict[str, bool] = {}
    for name, sql in (
        ("FTS5", "CREATE VIRTUAL TABLE temp._probe_fts USING fts5(a)"),
        (
            "the FTS5 trigram tokenizer",
            "CREATE VIRTUAL TABLE temp._probe_tri USING fts5(a, tokenize='trigram')",
        ),
    ):
        try:
            con.execute(sql)
        except sqlite3.OperationalError:
            found[name] = False
        else:
            found[name] = True
    return found


def create_private(path: Path) -> None:
    """Create ``path`` owner-only (0600, in a 0700 directory) unless it exists; SQLite
    would create it with the umask's mode (0644), and it holds what the sessions say."""
    ensure_private_dir(path.parent)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        return
    os.fchmod(fd, 0o600)
    os.close(fd)


def connect(
    path: Path | str, *, readonly: bool = False, create: bool = False, bulk: bool = False
) -> sqlite3.Connection:
    """Open the index. Readers use ``mode=ro``; the writer creates it (0600 in a 0700 dir).

    ``bulk`` is for a private file that nobody else opens until it is complete (a first load
    or a rebuild, see ``SqliteStore.start_bulk``): no journal, no syncs, an exclusive lock and
    a big page cache. A crash mid-way leaves a broken file that is deleted, never published.
    """
    p = Path(path)
    if str(path) != ":memory:":
        if create:
            create_private(p)
        elif not p.exists():
            if p.with_name(p.name + ".build").exists():
                raise IndexStateError(
                    f"{p}: the index is being built by a first sync; it can be searched as "
                    "soon as that sync has loaded the files"
                )
            raise IndexStateError(
                f"{p}: no index here yet; run `jsonltape sync ROOT` or start the daemon"
            )
    if readonly:
        con = sqlite3.connect(
            f"file:{p}?mode=ro", uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
        )
    else:
        con = sqlite3.connect(
            str(p), isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
        )
    try:
        con.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not readonly:
            con.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # only takes on a new, empty file
        if bulk:
            con.execute("PRAGMA locking_mode = EXCLUSIVE")
            con.execute("PRAGMA journal_mode = OFF")
            con.execute("PRAGMA synchronous = OFF")
            con.execute(f"PRAGMA cache_size = {-BULK_CACHE_KIB}")
        elif not readonly:
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("PRAGMA synchronous = NORMAL")
        if not bulk:
            con.execute(f"PRAGMA cache_size = {-(READER_CACHE_KIB if readonly else CACHE_KIB)}")
        if readonly:
            con.execute(f"PRAGMA mmap_size = {READER_MMAP_BYTES}")
        con.execute("PRAGMA temp_store = MEMORY")
        version = con.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        con.close()
        if (err := storage_error(exc, p)) is not None:
            raise err from None  # a full disk, not a damaged index: keep it (rebuild would not)
        raise IndexStateError(
            f"{p}: not a usable index ({exc}); `jsonltape index rebuild` recreates it"
        ) from None
    if version > SCHEMA_VERSION:
        con.close()
        raise IndexStateError(
            f"{p}: index schema version {version} was written by a newer jsonltape (this one "
            f"reads up to {SCHEMA_VERSION}); upgrade jsonltape or run `jsonltape index rebuild`"
        )
    if readonly and version < READABLE_FROM:
        con.close()
        raise IndexStateError(
            f"{p}: index schema version {version} is older than {READABLE_FROM}; "
            "run `jsonltape sync` (or the daemon) once to migrate it"
        )
    return con


def migrate(con: sqlite3.Connection) -> int:
    """Apply the missing migrations, each in its own immediate transaction; return the version."""
    version = int(con.execute("PRAGMA user_version").fetchone()[0])
    for number, name, sql in MIGRATIONS:
        if number <= version:
            continue
        con.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(sql):
                con.execute(statement)
            con.execute(
                "INSERT INTO migrations (version, name, applied) VALUES (?, ?, ?)",
                (number, name, int(time.time() * 1000)),
            )
            con.execute(f"PRAGMA user_version = {number}")
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:  # SQLite rolls back itself on some errors (a full disk)
                con.execute("ROLLBACK")
            raise
        version = number
    return version


def _statements(sql: str) -> list[str]:
    out: list[str] = []
    buf = ""
    for line in sql.strip().splitlines():
        buf += line + "\n"
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return out
