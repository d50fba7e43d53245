"""Stage 1: walk the roots, read the ACL files, pick this shard's files."""
