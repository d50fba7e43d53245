"""Stage 3: load, scan and chunk each planned document (in the caller or a parse process)."""
