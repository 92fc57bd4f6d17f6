"""jsonltape's sync daemon: mirrors a tree of session files into a searchable SQLite index.

Lives outside the ``jsonltape`` package on purpose: the library never imports it.
"""
