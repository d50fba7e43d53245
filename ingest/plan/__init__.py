"""Stage 2: compare discovered files with the document records."""
