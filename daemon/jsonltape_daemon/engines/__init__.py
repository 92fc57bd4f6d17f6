"""The index engines: SQLite (one machine) and PostgreSQL (a team), one module per job."""
