"""Stage 5: progress while it runs, the final report, terminal-safe output."""
