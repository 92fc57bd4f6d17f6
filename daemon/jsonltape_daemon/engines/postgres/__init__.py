"""The team index on PostgreSQL (daemon/SCHEMA.md, PostgreSQL part)."""
