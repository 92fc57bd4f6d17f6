"""How text is cut into what the index holds (identifier parts, CJK grams, the texts of events):
one rule for ingest and search."""
