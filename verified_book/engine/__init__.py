"""Verifying a book: the session, computing claims and judging figures, provenance, the machine, snippet runs, merging
contributed records."""
