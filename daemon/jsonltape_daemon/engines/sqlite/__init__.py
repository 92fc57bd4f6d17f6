"""The local index: one SQLite file with FTS5 tables (daemon/SCHEMA.md)."""
