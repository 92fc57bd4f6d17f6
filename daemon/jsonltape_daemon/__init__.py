"""jsonltape's index: mirrors trees of session files into a searchable index (SQLite on one
machine, PostgreSQL for a team), searches it, and keeps it current as a daemon.

- ``api``: the public API (sync, rebuild, optimize, status, open_reader) over both engines;
- ``engines.sqlite``, ``engines.postgres``: the engines, the only modules that hold SQL;
- ``ingest``: from session files to index rows, the same for both engines;
- ``text``: how text is cut into what the index holds (identifier parts, CJK grams);
- ``search``: the reader over both engines, ranking rules, snippets;
- ``service``: the daemon's watch loop, its lock, the push to a team index;
- ``target``, ``origin``, ``paths``, ``errors``: which index, whose rows, where things live,
  what can go wrong.

Lives outside the ``jsonltape`` package on purpose: the library never imports it.
"""
