"""Retrieval evaluation on BEIR-layout datasets (``docquery eval retrieval``).

``beir`` loads a dataset, ``chunking`` splits long documents the way the
embedder sees them, ``metrics`` scores a run, ``runner`` ingests the corpus into
a throwaway embedded collection and runs the queries through the same
``search`` the service uses.
"""
