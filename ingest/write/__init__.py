"""Stage 4: embed, upsert, replace and record, overlapped."""
