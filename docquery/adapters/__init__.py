"""Adapters behind the ports: Qdrant (embedded Edge or server), embedders, generators."""
