"""How a process runs: allocator tuning, socket preflight, JSON logs, the per-loop HTTP session."""
