"""The query side shared by both engines: the reader, ranking rules, snippets."""
